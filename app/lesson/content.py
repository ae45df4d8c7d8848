"""The guided lesson's text: assets/lesson.yaml, loaded, checked and resolved (no Gradio here).

A teacher edits the YAML file only. Its numbers come from the engine through placeholders,
`{namespace.value(arg=x, ...)}` or `{namespace.value:.2f}`, each one a function of
`values.VALUES`. `validate` says, in plain words, what is wrong with a lesson file: a
chapter without a title, text, widget, try-this or question; text over MAX_WORDS words; a
placeholder that does not resolve; a question whose answer is not exactly one of its choices; or a
literal number typed into a choice, an answer or the feedback (those must be placeholders, so a
typo can never teach a wrong figure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from decoding.methods.registry import METHODS
from decoding.paths import ASSETS
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, IMPLEMENTATIONS

from .values import VALUES

LESSON_FILE = ASSETS / "lesson.yaml"
MAX_WORDS = 120  # one idea in at most 120 words (counted with the placeholders resolved)
PLACEHOLDER = re.compile(r"\{([a-z_]+\.[a-z_]+)(?:\(([^(){}]*)\))?(?::([^{}]+))?\}")
DIGIT = re.compile(r"[0-9]")

# widget kind -> the settings it takes (a try-this changes one or more of them)
WIDGETS = {
    "trace": {"name", "upto", "panel", "show"},
    "coin": {"token", "seed", "lenience"},
    "lab": {"lenience", "n", "seed", "kl_bound", "residual", "implementation"},
    "theory": {"alpha", "gamma", "c", "numbers"},
    "race": {"name"},
    "tree": {"seed", "siblings"},
}


def panel_methods() -> list[str]:
    """The methods a trace widget's `panel` may name: those with a method panel (the registry's view)."""
    return [name for name, spec in METHODS.items() if spec.view.panel is not None]


class LessonError(ValueError):
    """A lesson file that cannot be shown; the message lists every problem found."""


@dataclass
class Question:
    ask: str
    choices: list[str]
    answer: int  # index into choices
    why: str


@dataclass
class Chapter:
    title: str
    text: str
    widget: dict
    try_label: str
    try_set: dict
    question: Question
    live: dict = field(default_factory=dict)
    reveal: dict = field(default_factory=dict)  # widget settings that Check applies
    id: str = ""  # the chapter's id (`id:`, or its English title as a slug): what a translation is keyed by


# --------------------------------------------------------------------------- placeholders
def _arg(text: str):
    text = text.strip().strip("'\"")
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _args(text: str | None) -> dict:
    if not text or not text.strip():
        return {}
    out = {}
    for part in text.split(","):
        key, eq, val = part.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ValueError(f"arguments are written name=value, got {part.strip()!r}")
        out[key.strip()] = _arg(val)
    return out


def format_value(v, spec: str | None = None) -> str:
    """A value as the lesson writes it: text as is, numbers with 3 significant digits (or `spec`)."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if spec:
        return format(v, spec)
    return str(v) if isinstance(v, int) else format(float(v), ".3g")


def resolve(text: str) -> str:
    """`text` with every placeholder replaced by its engine value; ValueError naming a bad one."""
    def one(m: re.Match) -> str:
        name, args, spec = m.group(1), m.group(2), m.group(3)
        if name not in VALUES:
            raise ValueError(f"unknown value {{{name}}} (known: {', '.join(sorted(VALUES))})")
        try:
            return format_value(VALUES[name](**_args(args)), spec)
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{m.group(0)} does not resolve: {exc}") from None
    return PLACEHOLDER.sub(one, str(text))


def literal_numbers(text: str) -> list[str]:
    """The digits typed outside placeholders (allowed in the chapter text, not in answers)."""
    return DIGIT.findall(PLACEHOLDER.sub("", str(text)))


# --------------------------------------------------------------------------- validation
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _words(text: str) -> int:
    """Words as a reader meets them: space-separated words, and, in a language written without spaces
    (Chinese), two characters for a word (a 120-word English paragraph reads as about 200 characters)."""
    cjk = len(CJK.findall(text))
    return len(CJK.sub(" ", text).split()) + (cjk + 1) // 2


def chapter_id(ch) -> str:
    """A chapter's id: its `id:`, or else its (English) title as a slug ("Guess and verify" ->
    "guess-and-verify"). The language files key their chapters by it."""
    given = ch.get("id") if isinstance(ch, dict) else None
    if isinstance(given, str) and given.strip():
        return given.strip()
    title = ch.get("title") if isinstance(ch, dict) else None
    return "-".join(re.findall(r"[a-z0-9]+", str(title or "").lower()))


def _check_chapter(n: int, ch, errors: list[str], live_keys: set[str] | None) -> Chapter | None:
    where = f"chapter {n}"
    if not isinstance(ch, dict):
        errors.append(f"{where} is not a mapping of title, text, widget, try and question")
        return None
    before = len(errors)
    title, text = ch.get("title"), ch.get("text")
    if not isinstance(title, str) or not title.strip():
        errors.append(f"{where} has no title")
    where = f"chapter {n} ({title})" if isinstance(title, str) else where
    if not isinstance(text, str) or not text.strip():
        errors.append(f"{where} has no text")
    widget = ch.get("widget")
    kind = widget.get("kind") if isinstance(widget, dict) else None
    if kind not in WIDGETS:
        errors.append(f"{where}: widget needs a kind, one of {', '.join(WIDGETS)}")
    else:
        extra = set(widget) - WIDGETS[kind] - {"kind"}
        if extra:
            errors.append(f"{where}: a {kind} widget has no setting {', '.join(sorted(extra))}")
        if widget.get("panel") is not None and widget.get("panel") not in panel_methods():
            errors.append(f"{where}: panel must be one of {', '.join(panel_methods())}")
        if widget.get("show", "all") not in ("all", "drafts", "positions"):
            errors.append(f"{where}: show is all (the iteration checked), drafts (its drafts before the check) "
                          "or positions (the run's acceptance per draft position so far)")
        if kind == "lab" and widget.get("implementation", DEFAULT_IMPLEMENTATION) not in IMPLEMENTATIONS:
            errors.append(f"{where}: implementation is one of {', '.join(IMPLEMENTATIONS)}")
    tried = ch.get("try")
    if not (isinstance(tried, dict) and isinstance(tried.get("label"), str) and isinstance(tried.get("set"), dict)
            and tried["set"]):
        errors.append(f"{where} has no try-this (try: label: ..., set: {{setting: value}})")
        tried = None
    elif kind in WIDGETS:
        bad = set(tried["set"]) - WIDGETS[kind]
        if bad:
            errors.append(f"{where}: try-this sets {', '.join(sorted(bad))}, which a {kind} widget does not have")
        if all(widget.get(k) == v for k, v in tried["set"].items()):
            errors.append(f"{where}: try-this changes nothing (the widget already has those settings)")
    reveal = ch.get("reveal") or {}
    if not isinstance(reveal, dict) or (kind in WIDGETS and set(reveal) - WIDGETS[kind]):
        errors.append(f"{where}: reveal sets widget settings, and a {kind} widget has only {', '.join(sorted(WIDGETS.get(kind, ())))}")
        reveal = {}
    if tried is not None and set(reveal) & set(tried["set"]):  # a reveal stays applied after Check
        errors.append(f"{where}: try-this and reveal both set {', '.join(sorted(set(reveal) & set(tried['set'])))}; "
                      "once an answer is checked the reveal wins, so the try-this would change nothing")
    live = ch.get("live") or {}
    if not isinstance(live, dict):
        errors.append(f"{where}: live is a mapping of the Explainer's controls (method: speculative, gamma: 4, ...)")
        live = {}
    elif live_keys is not None and set(live) - live_keys - {"trace"}:
        errors.append(f"{where}: live sets {', '.join(sorted(set(live) - live_keys - {'trace'}))}; "
                      f"it may set trace and {', '.join(sorted(live_keys))}")
    question = _check_question(where, ch.get("question"), errors)
    try:
        text_r = resolve(text) if isinstance(text, str) else ""
        if _words(text_r) > MAX_WORDS:
            errors.append(f"{where}: the text has {_words(text_r)} words; keep it to {MAX_WORDS}")
        label = resolve(tried["label"]) if tried else ""
        title_r = resolve(title) if isinstance(title, str) else ""
    except ValueError as exc:
        errors.append(f"{where}: {exc}")
        return None
    if len(errors) > before or question is None:
        return None
    return Chapter(title_r, text_r, dict(widget), label, dict(tried["set"]), question, dict(live), dict(reveal),
                   chapter_id(ch))


def _check_question(where: str, q, errors: list[str]) -> Question | None:
    if not isinstance(q, dict):
        errors.append(f"{where} has no question")
        return None
    ask, choices, answer, why = q.get("ask"), q.get("choices"), q.get("answer"), q.get("why")
    ok = True
    if not isinstance(ask, str) or not ask.strip():
        errors.append(f"{where}: the question has no ask")
        ok = False
    if not isinstance(why, str) or not why.strip():
        errors.append(f"{where}: the question has no why (the feedback that explains the answer)")
        ok = False
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        errors.append(f"{where}: the question needs a list of at least two choices")
        return None
    if not isinstance(answer, str) or not PLACEHOLDER.fullmatch(answer.strip()):
        errors.append(f"{where}: the answer must be one engine value, e.g. answer: '{{lab.reject_chance(token=is)}}'")
        ok = False
    for label, text in [("answer", answer), ("feedback", why), *(("a choice", c) for c in choices)]:
        if isinstance(text, str) and literal_numbers(text):
            errors.append(f"{where}: {label} has a literal number ({text.strip()!r}); write it as a placeholder")
            ok = False
    if not ok:
        return None
    try:
        resolved = [resolve(c) for c in choices]
        right = resolve(answer)
        ask_r, why_r = resolve(ask), resolve(why)
    except ValueError as exc:
        errors.append(f"{where}: {exc}")
        return None
    if len(set(resolved)) != len(resolved):
        errors.append(f"{where}: two choices read the same: {resolved}")
        return None
    hits = [i for i, c in enumerate(resolved) if c == right]
    if len(hits) != 1:
        errors.append(f"{where}: the answer {right!r} must be exactly one of the choices {resolved}")
        return None
    return Question(ask_r, resolved, hits[0], why_r)


def validate(data, live_keys=None) -> tuple[list[Chapter], list[str]]:
    """(the chapters, every problem found) of a parsed lesson file; `live_keys`: the names of the
    Explainer's controls a chapter's live: may set (unchecked when None)."""
    if not isinstance(data, dict) or not isinstance(data.get("chapters"), list) or not data["chapters"]:
        return [], ["the lesson file needs a list of chapters (chapters: - title: ...)"]
    errors: list[str] = []
    keys = None if live_keys is None else set(live_keys)
    chapters = [_check_chapter(n, ch, errors, keys) for n, ch in enumerate(data["chapters"], 1)]
    seen: dict[str, int] = {}
    for n, ch in enumerate(data["chapters"], 1):
        cid = chapter_id(ch)
        if not ID.fullmatch(cid):
            errors.append(f"chapter {n}: its id {cid!r} must be lowercase letters, digits and dashes (id: my-chapter)")
        elif cid in seen:
            errors.append(f"chapter {n}: id {cid!r} is chapter {seen[cid]}'s too; each chapter needs its own id")
        seen.setdefault(cid, n)
    return [c for c in chapters if c is not None], errors


def parse(text: str, live_keys=None) -> list[Chapter]:
    """The chapters of a lesson file's text; LessonError listing the problems otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LessonError(f"the lesson file is not valid YAML: {exc}") from None
    chapters, errors = validate(data, live_keys)
    if errors:
        raise LessonError("the lesson file has problems:\n- " + "\n- ".join(errors))
    return chapters


def load(path: Path | str = LESSON_FILE, live_keys=None) -> list[Chapter]:
    return parse(Path(path).read_text(encoding="utf-8"), live_keys)

