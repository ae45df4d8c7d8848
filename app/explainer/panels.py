"""The method panel of the explainer: dispatched by the record's method through the registry's
trace-data type, so a method with its own data gets its own panel and the others none.

Each panel builder returns (panel visibility, explanation, table/tree HTML, chart A, visibility of
chart B's column, chart B).
"""

from __future__ import annotations

import gradio as gr

from decoding.methods.registry import METHODS
from decoding.methods.mentored import MentoredStep
from decoding.methods.mjsd.generator import MjsdStep
from decoding.methods.ppd.generator import PPDStep
from decoding.trace.record import IterationRecord

from .. import charts_methods, render_methods, texts
from .view_common import position_index


def mentored_panel(record: IterationRecord, position, records) -> tuple:
    d = MentoredStep.of(record)
    bound = d.kl_bound if d else None
    title = f"### Mentored decoding panel (D = {bound:g})" if isinstance(bound, (int, float)) else "### Mentored decoding panel"
    return (gr.update(visible=True), f"{title}\n{texts.MENTORED}", render_methods.mentored_table_html(record),
            gr.update(value=charts_methods.mentored_acceptance_figure(record),
                      label="Strict vs mentored, per draft position", visible=True),
            gr.update(visible=True), charts_methods.mentored_output_figure(record, position_index(position)))


def mjsd_panel(record: IterationRecord, position, records) -> tuple:
    d = MjsdStep.of(record)
    head = (f"### MJSD panel (B = {d.beams}, τ = {d.tau:g})" if d and isinstance(d.tau, (int, float))
            else "### MJSD panel")
    return (gr.update(visible=True), f"{head}\n{texts.MJSD}", render_methods.mjsd_table_html(record),
            gr.update(value=charts_methods.mjsd_ratio_figure(record), visible=True,
                      label="Joint ratio per prefix length j, against τ"),
            gr.update(visible=False), None)


def ppd_panel(record: IterationRecord, position, records) -> tuple:
    info = PPDStep.of(record) or PPDStep()
    found, tuning = render_methods.ppd_tuning(records if records is not None else [record])
    rule = "typical acceptance (lossy)" if info.lossy else "exact match (lossless)"
    head = f"### PPD panel: {rule}, tree size n = {info.tree_size if info.tree_size is not None else '?'}"
    status = render_methods.ppd_status_html(record, found, tuning)
    # no tuning measurements: the status block says so in words, and the empty chart is hidden
    chart = charts_methods.ppd_tuning_figure(tuning, info.tree_size, found) if tuning else None
    return (gr.update(visible=True), f"{head}\n\n{status}\n\n{texts.PPD}", render_methods.ppd_table_html(record),
            gr.update(value=chart, visible=chart is not None,
                      label="Hardware-aware tree size: L(n), T(n) and Speedup(n) on this device"),
            gr.update(visible=False), None)


# the panel of each method's trace data (registry: decoding.methods.registry.METHODS[...].trace_data)
PANELS = {MentoredStep: mentored_panel, MjsdStep: mjsd_panel, PPDStep: ppd_panel}


def method_panel(record: IterationRecord | None, position=None, records: list[IterationRecord] | None = None) -> tuple:
    """The method-specific panel for a record, hidden for methods without one. `records` (the whole
    run) supplies PPD's hardware-aware tuning, which only its first record carries."""
    spec = METHODS.get(record.method) if record is not None else None
    build = PANELS.get(spec.trace_data) if spec is not None else None
    if build is None:
        return gr.update(visible=False), "", "", None, gr.update(visible=False), None
    return build(record, position, records)
