"""The Exactness lab tab's layout and events: a vocabulary with hand-written p and q, one speculative step
sampled N times (`events.lab_run`), its convergence (`events.lab_converge`); cheap, outside the queue
but "Watch it converge" (a stream), and shown once on page load."""

from __future__ import annotations

import gradio as gr

from decoding.rules.examples import EXAMPLES
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, IMPLEMENTATIONS
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB

from .. import texts
from .. import export
from ..errors import on
from ..i18n import t
from ..share import lab_figure
from .events import implementation_words, lab_converge, lab_example, lab_normalize, lab_run


def build(demo: gr.Blocks) -> None:
    """The tab's components and events (call inside `gr.Tab("Exactness lab")`)."""
    gr.Markdown(texts.LAB)
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=280):
            example = gr.Dropdown([(e.title, key) for key, e in EXAMPLES.items()], value="worked",
                                  label="Example (replaces the table)", elem_id="lab-example")
            table = gr.Dataframe(
                value=[[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)],
                headers=["token", "p (target)", "q (draft)"], datatype=["str", "number", "number"],
                type="array", interactive=True, label="Vocabulary, p and q (add or delete rows)",
                elem_id="lab-table",
            )
            normalize_btn = gr.Button("Normalise p and q to sum to 1", size="sm")
            implementation = gr.Dropdown([(i.label, key) for key, i in IMPLEMENTATIONS.items()],
                                         value=DEFAULT_IMPLEMENTATION, label="Implementation",
                                         elem_id="lab-implementation")
            implementation_md = gr.Markdown(implementation_words(DEFAULT_IMPLEMENTATION),
                                            elem_id="lab-implementation-words")
            lenience = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Lenience l (1 = exact)")
            n = gr.Dropdown([100, 1_000, 10_000, 100_000, 1_000_000], value=10_000, label="N steps")
            seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
            with gr.Row():
                lab_btn = gr.Button("Sample N", variant="primary", elem_id="lab-btn")
                converge_btn = gr.Button("Watch it converge", elem_id="converge-btn")
            status = gr.HTML("", elem_id="lab-status", padding=False)
            with gr.Accordion(t("export.menu.title"), open=False, elem_id="lab-share"):
                fig_panel = gr.Dropdown(export.panel_choices(export.LAB_PANELS), value="lab",
                                        label=t("export.menu.panel"), elem_id="lab-export-panel")
                fig_fmt = gr.Radio([("SVG", "svg"), ("PNG", "png")], value="svg", label=t("export.menu.format"),
                                   elem_id="lab-export-format")
                fig_btn = gr.Button(t("export.menu.button"), size="sm", elem_id="lab-export-btn")
                fig_note = gr.Markdown(t("export.menu.note"), elem_classes="note")
                fig_file = gr.File(label=t("export.menu.file"), visible=False, interactive=False,
                                   elem_id="lab-export-file")
        with gr.Column(scale=2, min_width=300):
            md = gr.Markdown()
            plot = gr.Plot(label="Empirical vs expected distribution", elem_id="lab-plot")
            with gr.Row():
                residual = gr.Plot(label="Residual", min_width=280)
                tv = gr.Plot(label="Convergence", min_width=280)

    shown = [plot, residual, tv, md]
    # the API's inputs keep their order; the implementation is the last one (default: the correct rule)
    inputs = [table, lenience, n, seed, implementation]
    on(lab_btn.click, lab_run, inputs, shown, status, api_name="lab", queue=False)
    on(converge_btn.click, lab_converge, [table, lenience, seed, implementation], shown, status,
       api_name="lab_converge")
    on(normalize_btn.click, lab_normalize, table, table, status, api_name=False, queue=False)
    # choosing an example or an implementation runs the lab at once (each step through the error boundary)
    picked = on(example.input, lab_example, example, table, status, api_name=False, queue=False)
    on(picked.then, lab_run, inputs, shown, status, api_name=False, queue=False)
    switched = on(implementation.input, implementation_words, implementation, implementation_md, status,
                  api_name=False, queue=False)
    on(switched.then, lab_run, inputs, shown, status, api_name=False, queue=False)
    on(demo.load, lab_run, inputs, shown, status, clear=False, api_name=False, queue=False)
    # a figure of the chart for the table and settings shown (the lab's seeded run, drawn again)
    on(fig_btn.click, lab_figure, [fig_panel, fig_fmt, *inputs], [fig_file, fig_note], status, clear=False,
       api_name=False, queue=False)
