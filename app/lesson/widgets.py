"""The lesson's live widgets: one chapter's widget settings -> what its panel shows.

Each widget is drawn by the app's own panels (`render`, `charts`, `charts_methods`, the race
`player`) from the engine's results (`decoding.rules.lab`, `decoding.rules.theory`, shipped traces and races),
so the lesson shows exactly what the Explainer, the lab and the race tab would. `render_widget`
returns a `WidgetView`; the tab (`tab.py`) puts it into its components.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from decoding.methods.registry import method_view
from decoding.rules import theory
from decoding.run.pair import PROMPT_LOOKUP
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, get_implementation
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB, run_sampling_lab

from decoding.trace.record import CORRECTION, Candidate, EmittedToken, IterationRecord, Residual, Timings, TreeNode

from .. import charts, charts_methods, charts_running, render, render_methods, render_tree
from ..html_text import fmt, token_html
from . import worked_tree
from ..i18n import t
from ..lab.events import impl_text
from .values import coin, find_trace, keep_chance, race, trace
from ..race.handlers import race_view

# Large enough for the lab's bars to settle, small enough to answer at once (the lab's own cap is higher).
MAX_LESSON_SAMPLES = 200_000


@dataclass
class WidgetView:
    """What a widget shows: HTML, up to two charts, and the race player's value (None: hidden)."""

    html: str = ""
    plot: object = None
    plot2: object = None
    player: dict | None = None


def _proposal(records, upto: int, summary) -> str:
    """Iteration `upto` before the target has checked it: the text so far and the drafts, no verdicts."""
    record = records[upto]
    before = render.chips_html(records, upto - 1) if upto > 0 else \
        (f'<div class="chips" role="list" aria-label="{html.escape(t("lesson.w.prompt"))}"><span class="prompt" role="listitem">'
         f'{token_html(summary.prompt if summary else "")}</span></div>')
    drafts = "".join(f'<span class="chip chip-none">{token_html(d.text)}</span>' for d in record.draft)
    origin = record.draft[0].source if record.draft else None
    if origin is None and summary is not None and (summary.models or {}).get("draft") == PROMPT_LOOKUP:
        origin = "lookup"
    source = t(f"lesson.w.source.{origin if origin in ('lookup', 'corpus', 'model') else 'other'}")
    if origin == "model" and any(d.source == "lookup" for d in record.draft):
        source += t("lesson.w.source.continued")
    said = t("lesson.w.proposal", i=record.iteration + 1, n=len(record.draft), source=source)
    return (f'{before}<p class="lesson-caption">{html.escape(said)}</p>'
            f'<div class="chips lesson-proposal">{drafts}</div>')


def _kl_decisions(record, stats: str, caption: str) -> WidgetView:
    return WidgetView(stats + render_methods.mentored_table_html(record),
                      charts_methods.mentored_acceptance_figure(record))


def _joint_prefixes(record, stats: str, caption: str) -> WidgetView:
    head = f'<p class="lesson-caption">{html.escape(t("lesson.w.beam", i=record.iteration + 1, n=len(record.draft)))}</p>'
    return WidgetView(stats + head, charts_methods.mjsd_ratio_figure(record))


def _prompt_tree(record, stats: str, caption: str) -> WidgetView:
    return WidgetView(stats + caption + render.tree_html(record))


# a trace widget's `panel` names a method; its panel kind (the registry's view) picks what the lesson shows,
# and a kind without a lesson view shows the chips, as a widget without a panel does
LESSON_PANELS = {"kl-decisions": _kl_decisions, "joint-prefixes": _joint_prefixes, "prompt-tree": _prompt_tree}


def _trace_view(w: dict) -> WidgetView:
    records, summary = trace(w["name"])
    upto = len(records) - 1 if w.get("upto", "last") == "last" else max(0, min(int(w["upto"]), len(records) - 1))
    record = records[upto]
    found = find_trace(w["name"])
    label = t("lesson.w.saved", name=found[0] if found else w["name"])
    if w.get("show") == "drafts":
        return WidgetView(f'<div class="lesson-note">{html.escape(label)}</div>' + _proposal(records, upto, summary))
    if w.get("show") == "positions":  # the run's acceptance per draft position over its first upto + 1 iterations
        shown = t("lesson.w.first", n=upto + 1) if upto < len(records) - 1 else t("lesson.w.all", n=len(records))
        note = f'<div class="lesson-note">{html.escape(label)}: {shown}.</div>'
        return WidgetView(note, charts_running.positions_figure(records[: upto + 1]))
    stats = render.stats_html(records, upto, summary if upto == len(records) - 1 else None, label)
    caption = f'<p class="lesson-caption">{html.escape(render.caption(record))}</p>'
    panel = LESSON_PANELS.get(method_view(w["panel"]).panel) if w.get("panel") else None
    if panel is not None:
        return panel(record, stats, caption)
    # the chips' legend: the colours a chapter names are on screen even where this iteration lacks a kind
    return WidgetView(stats + caption + render.legend_html() + render.chips_html(records, upto)
                      + render.draft_row_html(record))


def _example_rows(marked) -> str:
    """The worked example's p and q, one table row per token (the tokens in `marked` highlighted)."""
    return "".join(
        f'<tr{" class=cur" if v in marked else ""}><td>{html.escape(v)}</td>'
        f'<td><span class="lesson-bar p" style="--w:{p:.4f}"></span> {fmt(p)}</td>'
        f'<td><span class="lesson-bar q" style="--w:{q:.4f}"></span> {fmt(q)}</td></tr>'
        for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q))


def _coin_view(w: dict) -> WidgetView:
    """One check of one draft token of the worked example: p, q, the threshold, the coin, the verdict."""
    token, seed, lenience = str(w["token"]), int(w.get("seed", 0)), float(w.get("lenience", 1.0))
    i = EXAMPLE_VOCAB.index(token)
    threshold, u = keep_chance(token, lenience), coin(seed)
    kept = u <= threshold
    bars = _example_rows({token})
    verdict = (f'<span class="mark acc">{html.escape(t("lesson.w.kept"))}</span>' if kept else
               f'<span class="mark rej">{html.escape(t("lesson.w.rejected"))}</span>')
    rule = "p/q" if lenience == 1 else f"p/({lenience:g}·q)"
    heads = "".join(f"<th>{html.escape(t(key))}</th>" for key in ("lesson.w.col.token", "lesson.w.col.p",
                                                                    "lesson.w.col.q"))
    said = html.escape(t("lesson.w.coin", token="\x00", rule=rule, threshold="\x01", seed=seed, u="\x02",
                         cmp="≤" if kept else ">"))
    said = (said.replace("\x00", f'<span class="chip chip-none">{html.escape(token)}</span>')
            .replace("\x01", f"<b>{fmt(threshold)}</b>").replace("\x02", f"<b>{fmt(u)}</b>"))
    out = (f'<div class="lesson-coin"><table class="drafttable"><caption>{html.escape(t("lesson.w.table_caption"))}'
           f'</caption><thead><tr>{heads}</tr></thead><tbody>{bars}</tbody></table><p>{said}</p>'
           f'{render.coin_bar(u, threshold, kept)}<p class="lesson-verdict">{verdict}</p></div>')
    return WidgetView(out)


def worked_tree_record(siblings: int, seed: int) -> IterationRecord:
    """The worked tree checked with the coins of `seed` (`worked_tree.check`), as the trace record the
    Explainer's tree panel draws: the root, its guesses with their verdicts, the correction if any."""
    checked, correction = worked_tree.check(siblings, seed)
    nodes = [TreeNode(0, -1, -1, "…", 0, "root", True)]
    for rank, s in enumerate(checked):
        top = None
        if s.residual is not None:
            top = sorted((Candidate(i, v, r) for i, (v, r) in enumerate(zip(EXAMPLE_VOCAB, s.residual)) if r > 0),
                         key=lambda c: (-round(c.p, 9), c.token_id))
        nodes.append(TreeNode(rank + 1, 0, EXAMPLE_VOCAB.index(s.token), s.token, 1, "draft", s.verdict == "accepted",
                              q=s.q, p=s.p, coin=s.coin, threshold=s.threshold, verdict=s.verdict, sibling_rank=rank,
                              residual_mass=s.residual_mass, residual_top=top))
    emitted, residual = [], None
    if correction is not None:
        last = checked[-1]
        i = EXAMPLE_VOCAB.index(correction)
        emitted = [EmittedToken(i, correction, CORRECTION)]
        residual = Residual(i, correction, last.residual_mass, False, nodes[-1].residual_top or [])
    return IterationRecord(method="speculative", iteration=0, context_length=0, gamma=siblings, draft=[],
                           accepted_length=0, emitted=emitted, residual=residual, next_top=[], tree=nodes,
                           timings=Timings(), target_calls=1, draft_calls=1, generated=len(emitted), elapsed=0.0,
                           energy_joules=None, energy_note="", finished=False)


def _tree_view(w: dict) -> WidgetView:
    """The worked tree: p and q, then its guesses tried in order with their coins, residuals and verdicts."""
    siblings, seed = int(w.get("siblings", 2)), int(w.get("seed", 0))
    record = worked_tree_record(siblings, seed)
    guesses = t("lesson.w.tree.then").join(f"<b>{html.escape(g)}</b>" for g in worked_tree.SIBLINGS[:siblings])
    shape = t("lesson.w.tree.shape_tree" if siblings > 1 else "lesson.w.tree.shape_chain", guesses="\x00")
    kept = next((n for n in record.tree if n.verdict == "accepted"), None)
    end = (t("lesson.w.tree.kept", token="\x01") if kept is not None else t("lesson.w.tree.all_rejected"))
    said = html.escape(t("lesson.w.tree.head", shape=shape, seed=seed, end=end)).replace("\x00", guesses)
    if kept is not None:
        said = said.replace("\x01", f"<b>{html.escape(kept.text)}</b>")
    heads = "".join(f"<th>{html.escape(t(key))}</th>" for key in ("lesson.w.col.token", "lesson.w.col.p",
                                                                    "lesson.w.col.q"))
    table = (f'<table class="drafttable"><caption>{html.escape(t("lesson.w.table_caption"))}</caption><thead><tr>'
             f'{heads}</tr></thead><tbody>{_example_rows(set(worked_tree.SIBLINGS[:siblings]))}</tbody></table>')
    head = f'<p class="lesson-caption">{said}</p>'
    return WidgetView(f'<div class="lesson-coin">{table}</div>' + render_tree.verified_tree_html(record, head))


def _lab_view(w: dict) -> WidgetView:
    n = max(1, min(int(w.get("n", 10_000)), MAX_LESSON_SAMPLES))
    kl = w.get("kl_bound")
    implementation = get_implementation(w.get("implementation", DEFAULT_IMPLEMENTATION))
    result = run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, lenience=float(w.get("lenience", 1.0)), n=n,
                              seed=int(w.get("seed", 0)), kl_bound=None if kl is None else float(kl),
                              implementation=implementation.name)
    rule = (t("lesson.w.rule.mentored", d=f"{float(kl):g}") if kl is not None else
            impl_text(implementation.name, "label").lower() if implementation.name != DEFAULT_IMPLEMENTATION else
            t("lesson.w.rule.strict") if result["lenience"] == 1 else
            t("lesson.w.rule.lenience", l=f"{result['lenience']:g}"))
    line = ('<p class="lesson-caption">'
            + html.escape(t("lesson.w.lab", rule=rule, alpha=fmt(result["alpha"]), rate=fmt(result["acceptance_rate"]),
                            n=f"{n:,}", tv=f'{result["tv_to_expected"]:.4f}'))
            + (html.escape(t("lesson.w.lab.kl", kl=fmt(result["kl_to_target"]))) if kl is not None else "")
            + (html.escape(t("lesson.w.lab.away", tv=f'{result["expected_tv_to_target"]:.4f}'))
               if implementation.name != DEFAULT_IMPLEMENTATION else "") + ".</p>")
    # no residual chart where every draft is kept (the lab's own placeholder there reads "p = q", which
    # a lenient or mentored rule does not mean)
    shown = w.get("residual", True) and result["residual"] is not None
    residual = charts.lab_residual_figure(EXAMPLE_VOCAB, result) if shown else None
    return WidgetView(line, charts.lab_figure(EXAMPLE_VOCAB, result), residual)


def _theory_view(w: dict) -> WidgetView:
    a, g, c = float(w["alpha"]), int(w["gamma"]), float(w.get("c", 0.1))
    if not w.get("numbers", True):  # the closed forms' values wait for the answer (the chapter's reveal)
        said = t("lesson.w.theory.wait", alpha=f"{a:g}", gamma=g, c=f"{c:g}")
        line = f'<p class="lesson-caption">{html.escape(said)}</p>'
        return WidgetView(line, charts.theory_figure(a, c, g))
    said = t("lesson.w.theory", alpha=f"{a:g}", gamma=g, c=f"{c:g}", tpc=fmt(theory.expected_tokens_per_call(a, g)),
             accepted=fmt(theory.expected_accepted_length(a, g)), factor=f"{theory.improvement_factor(a, g, c):.2f}")
    line = f'<p class="lesson-caption">{html.escape(said)}</p>'
    return WidgetView(line, charts.theory_figure(a, c, g))


def _race_view(w: dict) -> WidgetView:
    title, result = race(w["name"])
    value, _figures = race_view(result)  # the player says who won once the race is over, not before
    return WidgetView(f'<p class="lesson-caption">{html.escape(t("lesson.w.race", title=title))}</p>', player=value)


VIEWS = {"trace": _trace_view, "coin": _coin_view, "lab": _lab_view, "theory": _theory_view, "race": _race_view,
         "tree": _tree_view}


def render_widget(widget: dict) -> WidgetView:
    """The view of a widget's settings (ValueError with a readable message for bad settings)."""
    return VIEWS[widget["kind"]](widget)
