"""A race's result in words and as plain data: who was faster, by the ratio of the two runs'
tokens per second (each run's figures are its RunSummary's, computed by the engine).

The sentence never calls a slower run faster: below a ratio of 1 it starts with "slower".
No Gradio here.
"""

from __future__ import annotations

from pathlib import Path

from decoding.methods.registry import METHODS
from decoding.run.pair import HYBRID, PROMPT_LOOKUP
from decoding.paths import SHIPPED_DRAFT
from decoding.trace.record import RunSummary

from .i18n import DEFAULT, catalog, t
from .race_file import Race


def drafter_words(name: str) -> str:
    """A drafter's name as the engine writes it ("hybrid (feature draft feature-draft-smollm2-135m +
    lookup)", "prompt-lookup") in words without folder names ("hybrid: copying + feature draft")."""
    name = str(name)
    if name.startswith(HYBRID):
        inner = name.partition("(")[2]
        model = t("race.drafter_words.feature") if inner.startswith("feature") else t("race.drafter_words.model")
        return t("race.drafter_words.hybrid", model=model) + (t("race.drafter_words.corpus") if "corpus" in inner
                                                              else "")
    if name == PROMPT_LOOKUP:
        return t("race.drafter_words.lookup")
    if name.startswith("feature"):
        return t("race.drafter_words.feature")
    if Path(name).name == SHIPPED_DRAFT.name:
        return t("race.drafter_words.distilled")
    return name


def method_title(method: str) -> str:
    """A method's name in the current language (the registry's title where the catalog has none)."""
    spec = METHODS.get(method)
    key = f"race.method.{method}"
    return t(key) if key in catalog(DEFAULT) else (spec.title if spec is not None else str(method))


def lane_name(summary: RunSummary) -> str:
    """A run's method with the settings that make it that method: "speculative (prompt lookup, γ 4)"."""
    spec = METHODS.get(summary.method)
    if spec is None:
        return summary.method
    settings = summary.settings or {}
    extra = settings.get("extra") or {}
    parts = []
    if spec.uses_drafter and (summary.models or {}).get("draft"):
        parts.append(drafter_words(summary.models["draft"]))
    if spec.uses_gamma and settings.get("gamma") is not None:
        schedule = extra.get("gamma_schedule")
        parts.append(f"γ {schedule}" if schedule and schedule != "fixed" else f"γ {settings['gamma']}")
    tree = _tree_words(extra.get("draft_tree"))
    if tree:
        parts.append(tree)
    return method_title(summary.method) + (f" ({', '.join(parts)})" if parts else "")


def _tree_words(setting) -> str:
    """A run's draft-tree setting in words ("draft trees", "draft trees of 16 tokens, 6 deep"); "" for
    chains (no setting, "off") and for a setting this engine cannot read."""
    from decoding.methods.tree_draft import parse_draft_tree

    if not setting:
        return ""
    try:
        parsed = parse_draft_tree(setting)
    except ValueError:
        return ""
    if parsed == "off":
        return ""
    if parsed == "auto":
        return t("race.drafter_words.trees")
    return t("race.drafter_words.trees_sized", n=parsed[0], d=parsed[1])


def speedup(a: RunSummary, b: RunSummary) -> float | None:
    """Run A's tokens/s over run B's; None when B has no speed to compare with."""
    return a.tokens_per_second / b.tokens_per_second if b.tokens_per_second > 0 else None


def verdict(ratio: float | None) -> str:
    if ratio is None:
        return "unknown"
    return "faster" if ratio > 1 else "slower" if ratio < 1 else "same"


def _ratio_text(ratio: float) -> str:
    text = f"{ratio:.2f}"
    return f"{ratio:.3f}" if text == "1.00" and ratio != 1 else text


def _secs(x: float) -> str:
    return f"{x:.2f} s" if x >= 0.1 else f"{x:.3f} s"


def _tokens(n: int) -> str:
    return t("race.result.tokens_one", n=n) if n == 1 else t("race.result.tokens", n=n)


def result_sentence(a: RunSummary, b: RunSummary, a_name: str | None = None, b_name: str | None = None) -> str:
    """The race's result, plainly: tokens and seconds of both runs, both tokens/s, the ratio and the
    target calls, e.g. "speculative: 64 tokens in 2.10 s against 3.20 s for autoregressive (30.5 against
    20.0 tokens/s), 1.52x faster, 41 target calls instead of 64."."""
    a_name = a_name or a.method
    b_name = b_name or b.method
    na, nb = len(a.token_ids), len(b.token_ids)
    ratio = speedup(a, b)
    if nb == na:
        run = t("race.result.run_same", tokens=_tokens(na), secs_a=_secs(a.wall_seconds), secs_b=_secs(b.wall_seconds),
                b=b_name)
    else:
        run = t("race.result.run_diff", tokens_a=_tokens(na), secs_a=_secs(a.wall_seconds), tokens_b=_tokens(nb),
                secs_b=_secs(b.wall_seconds), b=b_name)
    speeds = t("race.result.speeds", tps_a=f"{a.tokens_per_second:.1f}", tps_b=f"{b.tokens_per_second:.1f}")
    calls = t("race.result.calls", calls_a=a.target_calls, calls_b=b.target_calls)
    kind = verdict(ratio)
    words = dict(a=a_name, b=b_name, run=run, speeds=speeds, calls=calls)
    if kind in ("faster", "slower"):
        text = t(f"race.result.{kind}", ratio=_ratio_text(ratio), **words)
    else:
        text = t(f"race.result.{kind}", **words)
    if na != nb:
        text += t("race.result.different_lengths")
    return text


def race_figures(race: Race) -> dict:
    """What the race api returns as plain data: both summary lines, the speedup of A over B and the
    result sentence."""
    a, b = race.lanes[0].summary, race.lanes[1].summary
    ratio = speedup(a, b)
    return {
        "speedup": ratio,
        "verdict": verdict(ratio),
        "result": result_sentence(a, b, lane_name(a), lane_name(b)),
        "title": race.title,
        "gallery_id": race.gallery_id,
        "recorded": race.recorded,
        "lanes": [{"label": lane.label, "role": lane.role, "name": lane_name(lane.summary),
                   "summary": lane.summary.to_dict()} for lane in race.lanes],
    }
