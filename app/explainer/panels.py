"""The method panel of the explainer: dispatched by the panel kind of the record's method
(`decoding.methods.registry`: `MethodSpec.view.panel`). A kind without a renderer here, or the kind
"fields", shows every field of the method's trace data as a plain table, so a new method shows without a
change here; a method without a panel kind (or without trace data in the record) gets none.

Each panel builder returns (panel visibility, explanation, table/tree HTML, chart A, visibility of
chart B's column, chart B).
"""

from __future__ import annotations

import gradio as gr

from decoding.methods.registry import METHODS, MethodSpec
from decoding.methods.mentored import MentoredStep
from decoding.methods.mjsd.generator import MjsdStep
from decoding.methods.ppd.generator import PPDStep
from decoding.trace.record import IterationRecord

from .. import charts_methods, render_methods
from ..render import tr
from ..iterations import position_index


def mentored_panel(record: IterationRecord, position, records, lang: str | None = None) -> tuple:
    d = MentoredStep.of(record)
    bound = d.kl_bound if d else None
    title = (tr("panel.mentored_d", lang, bound=f"{bound:g}") if isinstance(bound, (int, float))
             else tr("panel.mentored", lang))
    return (gr.update(visible=True), f"### {title}\n{tr('text.mentored', lang)}",
            render_methods.mentored_table_html(record, lang),
            gr.update(value=charts_methods.mentored_acceptance_figure(record),
                      label=tr("panel.mentored_chart", lang), visible=True),
            gr.update(visible=True), charts_methods.mentored_output_figure(record, position_index(position)))


def mjsd_panel(record: IterationRecord, position, records, lang: str | None = None) -> tuple:
    d = MjsdStep.of(record)
    head = (tr("panel.mjsd_b", lang, beams=d.beams, tau=f"{d.tau:g}") if d and isinstance(d.tau, (int, float))
            else tr("panel.mjsd", lang))
    return (gr.update(visible=True), f"### {head}\n{tr('text.mjsd', lang)}", render_methods.mjsd_table_html(record, lang),
            gr.update(value=charts_methods.mjsd_ratio_figure(record), visible=True,
                      label=tr("panel.mjsd_chart", lang)),
            gr.update(visible=False), None)


def ppd_panel(record: IterationRecord, position, records, lang: str | None = None) -> tuple:
    info = PPDStep.of(record) or PPDStep()
    found, tuning = render_methods.ppd_tuning(records if records is not None else [record])
    rule = tr("panel.ppd_lossy" if info.lossy else "panel.ppd_exact", lang)
    head = tr("panel.ppd", lang, rule=rule, n=info.tree_size if info.tree_size is not None else "?")
    status = render_methods.ppd_status_html(record, found, tuning, lang)
    # no tuning measurements: the status block says so in words, and the empty chart is hidden
    chart = charts_methods.ppd_tuning_figure(tuning, info.tree_size, found) if tuning else None
    return (gr.update(visible=True), f"### {head}\n\n{status}\n\n{tr('text.ppd', lang)}",
            render_methods.ppd_table_html(record, lang),
            gr.update(value=chart, visible=chart is not None, label=tr("panel.ppd_chart", lang)),
            gr.update(visible=False), None)


def fields_panel(record: IterationRecord, position, records, spec: MethodSpec, lang: str | None = None) -> tuple:
    """The fallback: the method's summary, then every field of its trace data in this record."""
    data = spec.trace_data.of(record) if spec.trace_data is not None else None
    return (gr.update(visible=True),
            f"### {tr('panel.fields', lang, method=spec.title)}\n{spec.summary[:1].upper()}{spec.summary[1:]}.",
            render_methods.fields_table_html(record, data, lang), gr.update(value=None, visible=False),
            gr.update(visible=False), None)


# the renderer of each panel kind (registry: decoding.methods.registry.METHODS[...].view.panel)
PANELS = {"kl-decisions": mentored_panel, "joint-prefixes": mjsd_panel, "prompt-tree": ppd_panel}

# the panel kinds whose second chart follows the draft position picked in the p/q chart
POSITION_FIGURES = {"kl-decisions": charts_methods.mentored_output_figure}


def method_panel(record: IterationRecord | None, position=None, records: list[IterationRecord] | None = None,
                 lang: str | None = None) -> tuple:
    """The method-specific panel for a record, hidden for methods without one. `records` (the whole
    run) supplies PPD's hardware-aware tuning, which only its first record carries."""
    spec = METHODS.get(record.method) if record is not None else None
    kind = spec.view.panel if spec is not None and spec.trace_data is not None else None
    if kind is None:
        return gr.update(visible=False), "", "", None, gr.update(visible=False), None
    build = PANELS.get(kind)
    if build is None:
        return fields_panel(record, position, records, spec, lang)
    return build(record, position, records, lang)


def position_figure(record: IterationRecord, position: int | None):
    """The method panel's chart that follows the picked draft position, or gr.skip() where its kind has none."""
    spec = METHODS.get(record.method)
    figure = POSITION_FIGURES.get(spec.view.panel) if spec is not None else None
    return figure(record, position) if figure is not None else gr.skip()
