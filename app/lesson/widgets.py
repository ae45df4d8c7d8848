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
        (f'<div class="chips" role="list" aria-label="The prompt"><span class="prompt" role="listitem">'
         f'{token_html(summary.prompt if summary else "")}</span></div>')
    drafts = "".join(f'<span class="chip chip-none">{token_html(d.text)}</span>' for d in record.draft)
    origin = record.draft[0].source if record.draft else None
    if origin is None and summary is not None and (summary.models or {}).get("draft") == PROMPT_LOOKUP:
        origin = "lookup"
    source = {"lookup": "copied from the context", "corpus": "copied from the target's earlier answers",
              "model": "proposed by the draft model"}.get(origin, "proposed by the drafter")
    if origin == "model" and any(d.source == "lookup" for d in record.draft):
        source += " and continued by a copy from the context"
    return (f'{before}<p class="lesson-caption">Iteration {record.iteration + 1}: {len(record.draft)} draft tokens '
            f'{source}, not checked yet:</p><div class="chips lesson-proposal">{drafts}</div>')


def _kl_decisions(record, stats: str, caption: str) -> WidgetView:
    return WidgetView(stats + render_methods.mentored_table_html(record),
                      charts_methods.mentored_acceptance_figure(record))


def _joint_prefixes(record, stats: str, caption: str) -> WidgetView:
    head = (f'<p class="lesson-caption">Iteration {record.iteration + 1}: {len(record.draft)} draft tokens, '
            'one beam.</p>')
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
    label = f"A saved run: {found[0] if found else w['name']} (no model needed)"
    if w.get("show") == "drafts":
        return WidgetView(f'<div class="lesson-note">{html.escape(label)}</div>' + _proposal(records, upto, summary))
    if w.get("show") == "positions":  # the run's acceptance per draft position over its first upto + 1 iterations
        shown = f"its first {upto + 1} iterations" if upto < len(records) - 1 else f"all {len(records)} iterations"
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
    verdict = ('<span class="mark acc">✓ kept</span>' if kept else '<span class="mark rej">✗ rejected: a correction '
               'is drawn from the residual</span>')
    rule = "p/q" if lenience == 1 else f"p/({lenience:g}·q)"
    out = (f'<div class="lesson-coin"><table class="drafttable"><caption>The worked example: target p and draft q'
           f'</caption><thead><tr><th>token</th><th>p (target)</th><th>q (draft)</th></tr></thead>'
           f'<tbody>{bars}</tbody></table>'
           f'<p>The draft proposes <span class="chip chip-none">{html.escape(token)}</span>: '
           f'threshold min(1, {rule}) = <b>{fmt(threshold)}</b>; coin (seed {seed}) u = <b>{fmt(u)}</b> → '
           f'u {"≤" if kept else ">"} threshold.</p>'
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
    guesses = " then ".join(f"<b>{html.escape(t)}</b>" for t in worked_tree.SIBLINGS[:siblings])
    shape = (f"a tree: {guesses}, two guesses under one token" if siblings > 1
             else f"a chain: one guess, {guesses}, at this position")
    kept = next((n for n in record.tree if n.verdict == "accepted"), None)
    end = (f"<b>{html.escape(kept.text)}</b> is kept: the pass goes on to its children (a deeper tree's next "
           "level)." if kept is not None else "Every guess was rejected: the correction ends the iteration here.")
    head = (f'<p class="lesson-caption">The draft proposes {shape}; coins of seed {seed}. {end}</p>')
    table = ('<table class="drafttable"><caption>The worked example: target p and draft q</caption><thead><tr>'
             f'<th>token</th><th>p (target)</th><th>q (draft)</th></tr></thead><tbody>'
             f'{_example_rows(set(worked_tree.SIBLINGS[:siblings]))}</tbody></table>')
    return WidgetView(f'<div class="lesson-coin">{table}</div>' + render_tree.verified_tree_html(record, head))


def _lab_view(w: dict) -> WidgetView:
    n = max(1, min(int(w.get("n", 10_000)), MAX_LESSON_SAMPLES))
    kl = w.get("kl_bound")
    implementation = get_implementation(w.get("implementation", DEFAULT_IMPLEMENTATION))
    result = run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, lenience=float(w.get("lenience", 1.0)), n=n,
                              seed=int(w.get("seed", 0)), kl_bound=None if kl is None else float(kl),
                              implementation=implementation.name)
    rule = (f"mentored, D = {float(kl):g}" if kl is not None else
            implementation.label.lower() if implementation.name != DEFAULT_IMPLEMENTATION else
            "strict" if result["lenience"] == 1 else f"lenience l = {result['lenience']:g}")
    line = (f'<p class="lesson-caption">Rule: <b>{rule}</b>. α = <b>{fmt(result["alpha"])}</b> (the chance a draft is '
            f'kept); measured acceptance <b>{fmt(result["acceptance_rate"])}</b> over N = {n:,} steps; '
            f'TV(empirical, expected) = {result["tv_to_expected"]:.4f}'
            + (f'; KL(p ‖ expected) = {fmt(result["kl_to_target"])}' if kl is not None else "")
            + (f'; its output is TV = <b>{result["expected_tv_to_target"]:.4f}</b> away from p'
               if implementation.name != DEFAULT_IMPLEMENTATION else "") + ".</p>")
    # no residual chart where every draft is kept (the lab's own placeholder there reads "p = q", which
    # a lenient or mentored rule does not mean)
    shown = w.get("residual", True) and result["residual"] is not None
    residual = charts.lab_residual_figure(EXAMPLE_VOCAB, result) if shown else None
    return WidgetView(line, charts.lab_figure(EXAMPLE_VOCAB, result), residual)


def _theory_view(w: dict) -> WidgetView:
    a, g, c = float(w["alpha"]), int(w["gamma"]), float(w.get("c", 0.1))
    if not w.get("numbers", True):  # the closed forms' values wait for the answer (the chapter's reveal)
        line = (f'<p class="lesson-caption">α = <b>{a:g}</b>, γ = <b>{g}</b>, c = {c:g}: the exact figures show '
                'once you have checked your answer.</p>')
        return WidgetView(line, charts.theory_figure(a, c, g))
    line = (f'<p class="lesson-caption">α = <b>{a:g}</b>, γ = <b>{g}</b>, c = {c:g}: '
            f'<b>{fmt(theory.expected_tokens_per_call(a, g))}</b> tokens per target call '
            f'({fmt(theory.expected_accepted_length(a, g))} accepted drafts + one correction or bonus), '
            f'improvement ×{theory.improvement_factor(a, g, c):.2f} when a verify pass costs one target step.</p>')
    return WidgetView(line, charts.theory_figure(a, c, g))


def _race_view(w: dict) -> WidgetView:
    title, result = race(w["name"])
    value, _figures = race_view(result)  # the player says who won once the race is over, not before
    return WidgetView(f'<p class="lesson-caption">Race: <b>{html.escape(title)}</b>. Replay it, or watch in slow '
                      "motion.</p>", player=value)


VIEWS = {"trace": _trace_view, "coin": _coin_view, "lab": _lab_view, "theory": _theory_view, "race": _race_view,
         "tree": _tree_view}


def render_widget(widget: dict) -> WidgetView:
    """The view of a widget's settings (ValueError with a readable message for bad settings)."""
    return VIEWS[widget["kind"]](widget)
