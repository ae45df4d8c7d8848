"""The explainer's view of one iteration: every panel, by the name of its output (`VIEW_OUTPUTS`).

`view(session, upto, position)` renders the session's run at iteration `upto` (the records hold
every number; nothing here recomputes what the engine measured, and run statistics come from
`decoding.trace.metrics`) as a `View`: a named tuple whose fields are the outputs' names, which the
Explainer's layout (tab.py) also creates its components under, so their order is defined once.
"""

from __future__ import annotations

from collections import namedtuple

import gradio as gr

from decoding.rules import theory
from decoding.methods.registry import METHODS, method_view
from decoding.trace.metrics import RunCounts

from .. import charts, charts_running, render, render_tree
from ..render import tr
from .panels import method_panel
from ..session import Session
from ..settings import cli_command
from ..iterations import iteration_index, position_index, rest_index


def theory_panel(session: Session, upto: int | None = None, lang: str | None = None):
    """Theorem 3.8 of Leviathan et al. at this run's measured alpha and cost ratio, against what the
    run measured (all figures from `decoding.trace.metrics`)."""
    records = session.records[: (upto + 1) if upto is not None else None]
    spec = METHODS.get(records[-1].method) if records else None
    if spec is not None and spec.view.theory == "tree-size":
        msg = tr("theory.tree_size", lang, method=spec.title)
        return charts.empty_figure(tr("theory.tree_size_short", lang, method=spec.title),
                                   tr("theory.title", lang)), msg
    counts = RunCounts.from_records(records)
    alpha, c = counts.alpha, counts.c_verify
    drafted = [r for r in records if r.draft]
    if alpha is None or c is None or not drafted:
        why = tr("theory.no_drafts" if alpha is None else "theory.not_timed", lang)
        msg = tr("theory.needs_run", lang, why=why)
        return charts.empty_figure(msg, tr("theory.title", lang)), msg
    gamma = max(r.gamma for r in drafted)
    a = min(max(alpha, 0.0), 1.0)
    _, best_words = charts.optimal_gamma_words(a, c, lang=lang)  # within the γ slider's range, and beyond it if higher
    predicted = theory.improvement_factor(a, gamma, c)
    measured_tpc, tps = counts.tokens_per_call, counts.tokens_per_second
    lines = [
        tr("theory.measured_alpha", lang, alpha=f"{a:.3f}", drafted=counts.drafted_tokens, c=f"{c:.4f}"),
        tr("theory.at_gamma", lang, gamma=gamma, tokens=f"{theory.expected_tokens_per_call(a, gamma):.2f}",
           accepted=f"{theory.expected_accepted_length(a, gamma):.2f}", factor=f"{predicted:.2f}", best=best_words),
        tr("theory.measured_run", lang, tokens=f"{measured_tpc:.2f}", tps=f"{tps:.1f}"),
    ]
    baseline = session.baseline_tps()
    method = records[-1].method
    if baseline and not method_view(method).baseline:
        ratio = tps / baseline if baseline else 0.0
        if ratio < 1:
            lines.append(tr("theory.slower", lang, method=method, tps=f"{tps:.1f}", baseline=f"{baseline:.1f}",
                            ratio=f"{ratio:.2f}"))
        else:
            lines.append(tr("theory.speedup", lang, tps=f"{tps:.1f}", baseline=f"{baseline:.1f}", ratio=f"{ratio:.2f}"))
    else:
        lines.append(tr("theory.no_baseline", lang))
    if method_view(method).theory != "exact":
        lines.append(tr("theory.reference", lang, method=method))
    if predicted < 1:
        lines.append(tr("theory.slowdown", lang))
    return charts.theory_figure(a, c, gamma, lang=lang), "\n\n".join(lines)


# the names of `view`'s outputs, in order: the layout creates a component under each name and wires them in
# this order (tab.py)
VIEW_OUTPUTS = ("stats", "timeline", "iter_caption", "chips", "text", "draft_row", "pq_plot", "residual_plot", "tree",
                "running", "theory_plot", "theory_md", "cli", "download", "method_box", "method_md", "method_html",
                "method_plot", "method_col2", "method_plot2", "playback")
LIGHT = frozenset({"stats", "timeline", "iter_caption", "chips", "text", "draft_row"})
# the outputs of `panels.method_panel`, in the order it returns them
METHOD_PANEL = ("method_box", "method_md", "method_html", "method_plot", "method_col2", "method_plot2")
View = namedtuple("View", VIEW_OUTPUTS)


def view_of(**shown) -> View:
    """A `View` with the outputs named in `shown`, every other output left as it is (gr.skip())."""
    return View(**{name: shown.get(name, gr.skip()) for name in VIEW_OUTPUTS})


def timeline_update(n: int, i: int):
    """The timeline slider for a run of `n` iterations at index `i`: iterations counted from 1 (a
    slider needs two stops: a run of one iteration gets 1 to 2, and 2 shows its one iteration)."""
    return gr.update(minimum=1, maximum=max(2, n), value=i + 1)


def whole_run_note(session: Session, i: int, lang: str | None = None) -> str:
    """When a finished run is shown before its last iteration: the whole run's measured figures."""
    s, n = session.summary, len(session.records)
    if s is None or i >= n - 1:
        return ""
    key = "view.whole_run_rest" if i == rest_index(session.records) else "view.whole_run"
    return tr(key, lang, i=i + 1, n=n, tokens=len(s.token_ids), seconds=f"{s.wall_seconds:.2f}",
              tps=f"{s.tokens_per_second:.1f}")


def view(session: Session, upto=None, position=None, final: bool = False, note: str = "", playback=None,
         light: bool = False, lang: str | None = None):
    """Every panel of the explainer for iteration `upto` (an index) of the session's run, as a `View`
    (a tuple in the order of `VIEW_OUTPUTS`, its fields named by them). `upto` None: the iteration a
    finished run rests on (`final`: `rest_index`), else the last. `playback`: the browser player's new value (`player.py`), or None
    to leave the player as it is (moving the timeline must not restart a playback). `light`: only
    the cheap panels (the figures, chips, text and draft row), the rest left as they are: what a
    run refreshes while it decodes. `lang`: the language of every text (None: the event's language,
    `i18n.current()`)."""
    records = session.records
    played = gr.skip() if playback is None else playback
    if not records:
        empty = charts.empty_figure(tr("view.no_run", lang))
        return View(stats=render.stats_html([], note=note or tr("view.no_run_press", lang), lang=lang),
                    timeline=timeline_update(0, 0), iter_caption="", chips=render.chips_html([], lang=lang), text="",
                    draft_row=render.draft_row_html(None, lang), pq_plot=empty, residual_plot=empty,
                    tree=render.tree_html(None, lang=lang), running=charts_running.running_figure([], lang=lang),
                    theory_plot=empty,
                    theory_md="",
                    cli="", download=gr.update(value=None, interactive=False),
                    **dict(zip(METHOD_PANEL, method_panel(None, lang=lang))), playback=played)
    i = rest_index(records) if (upto is None and final) else iteration_index(records, upto)
    record = records[i]
    last = i == len(records) - 1
    text = session.summary.text if (last and session.summary is not None) else render.text_so_far(records, i)
    note = " ".join(n for n in (whole_run_note(session, i, lang), note) if n)
    stats = render.stats_html(records, i, session.summary if last else None, session.models_label(lang), note,
                              lang=lang)
    if light:
        return view_of(stats=stats, timeline=timeline_update(len(records), i),
                       iter_caption=render.caption(record, lang), chips=render.chips_html(records, i, lang=lang),
                       text=text, draft_row=render.draft_row_html(record, lang))
    theory_fig, theory_md = theory_panel(session, i, lang)
    cli = cli_command(session.settings) if session.settings is not None else ""
    download = gr.update(value=session.trace_path(), interactive=True) if final else gr.skip()
    return View(
        stats=stats,
        timeline=timeline_update(len(records), i),
        iter_caption=render.caption(record, lang),
        chips=render.chips_html(records, i, lang=lang),
        text=text,
        draft_row=render.draft_row_html(record, lang),
        pq_plot=charts.pq_figure(record, position_index(position), lang),
        residual_plot=charts.residual_figure(record, lang),
        tree=render_tree.tree_panel_html(record, lang),
        running=charts_running.running_figure(records, i, session.baseline_tps(), session.target_bytes,
                                              session.draft_bytes, lang=lang),
        theory_plot=theory_fig,
        theory_md=theory_md,
        cli=cli,
        download=download,
        **dict(zip(METHOD_PANEL, method_panel(record, position, records, lang=lang))),
        playback=played,
    )
