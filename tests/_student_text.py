"""What a student must never read: developer text (Python values, commands, file and machine paths,
CLI flags, raw special tokens, internal names). Shared by the unit tests on rendered panels
(app/test_student_text.py) and the browser tests (e2e/)."""

from __future__ import annotations

import html
import re

DEV_PATTERNS = {
    "a Python or JSON value": r"\b(?:None|True|False|null|NaN)\b",
    "a traceback": r"Traceback|File \"",
    "a command": r"python -m|pip install|\bmake (?:gpu-check|demo|test|setup|distill|cli-demo)\b",
    "a Python file": r"\b\w+\.py\b",
    "a file path": r"(?<![\w.])(?:assets|docs|scripts|decoding|benchmarks|app)/\w",
    "a machine path": r"/sys/|/tmp/|/home/|~/\.cache|/proc/",
    "a command-line flag": r"(?<![\w-])--[a-z][a-z-]+",
    "jargon of the code": r"\bHF's\b|\bGGUF\b|\bpowercap\b|\bNVML\b|\bpynvml\b|SPECDEC_",
    "an internal name": r"\b(?:max_new_tokens|stop_reason|energy_note|gamma_schedule|tree_size|kl_bound|match_length|"
                        r"tree_budget|prompt_tokens\.pt)\b",
    "a raw special token": r"<\|[^|<>\s]{1,40}\|>",
}


def visible_text(markup: str) -> str:
    """The text of some HTML a student can read: element text and the attribute values shown as
    tooltips or read aloud (title, aria-label, data-tip), unescaped; tag and attribute names dropped."""
    shown = " ".join(m.group(2) for m in re.finditer(r'(title|aria-label|data-tip|alt)="([^"]*)"', markup))
    text = re.sub(r"<[^>]*>", " ", markup)
    return html.unescape(text + " " + shown)


def dev_hits(text: str) -> list[str]:
    """Each developer pattern found in `text`, as "what: '...context...'"."""
    hits = []
    for what, pattern in DEV_PATTERNS.items():
        for m in re.finditer(pattern, text):
            hits.append(f"{what}: {text[max(0, m.start() - 40):m.end() + 30]!r}")
    return hits


def figure_text(fig) -> str:
    """What a plotly figure shows in words: titles, annotations, trace names, category labels, texts."""
    if fig is None:
        return ""
    if isinstance(fig, dict) and "value" in fig and "data" not in fig:  # a gr.update(value=...)
        fig = fig["value"]
    if not isinstance(fig, dict) or "data" not in fig:
        return ""
    layout = fig["layout"]
    parts = [str((layout.get("title") or {}).get("text", ""))]
    parts += [str(a.get("text", "")) for a in layout.get("annotations", [])]
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            parts.append(str((axis.get("title") or {}).get("text", "")))
            parts += [str(t) for t in axis.get("ticktext", [])]
    for trace_ in fig["data"]:
        parts.append(str(trace_.get("name", "")))
        for key in ("text", "hovertext"):
            value = trace_.get(key)
            parts += [str(v) for v in value] if isinstance(value, list) else [str(value or "")]
        if trace_.get("type") == "bar":
            parts += [str(x) for x in trace_.get("x", [])]
    return " ".join(parts).replace("<br>", " ").replace("<b>", "").replace("</b>", "")
