"""The Exactness lab tab's layout and events: a vocabulary with hand-written p and q, one speculative step
sampled N times (`events.lab_run`), its convergence (`events.lab_converge`); cheap, outside the queue
but "Watch it converge" (a stream), and shown once on page load."""

from __future__ import annotations

import gradio as gr

from decoding.rules.examples import EXAMPLES
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, IMPLEMENTATIONS
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB

from ..errors import on
from ..i18n import t
from ..i18n.ui import chrome, on_change
from .events import (example_choices, implementation_choices, implementation_words, lab_converge, lab_example,
                     lab_headers, lab_normalize, lab_run, lab_table)


def build(demo: gr.Blocks) -> None:
    """The tab's components and events (call inside the lab's gr.Tab). Its texts follow the page's
    language: the chrome by `i18n.ui.chrome`, the results by re-running the lab (`on_change`)."""
    chrome(gr.Markdown(t("lab.intro")), value="lab.intro")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=280):
            example = chrome(gr.Dropdown(example_choices(), value="worked", label=t("lab.example"),
                                         elem_id="lab-example"),
                             label="lab.example", choices=lambda lang: example_choices())
            table = gr.Dataframe(
                value=[[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)],
                headers=lab_headers(), datatype=["str", "number", "number"],
                type="array", interactive=True, label=t("lab.table"), elem_id="lab-table",
            )
            chrome(table, label="lab.table")
            normalize_btn = chrome(gr.Button(t("lab.normalize"), size="sm"), value="lab.normalize")
            implementation = chrome(gr.Dropdown(implementation_choices(), value=DEFAULT_IMPLEMENTATION,
                                                label=t("lab.implementation"), elem_id="lab-implementation"),
                                    label="lab.implementation", choices=lambda lang: implementation_choices())
            implementation_md = gr.Markdown(implementation_words(DEFAULT_IMPLEMENTATION),
                                            elem_id="lab-implementation-words")
            lenience = chrome(gr.Slider(0.05, 1.0, value=1.0, step=0.05, label=t("lab.lenience")),
                              label="lab.lenience")
            n = chrome(gr.Dropdown([100, 1_000, 10_000, 100_000, 1_000_000], value=10_000, label=t("lab.n")),
                       label="lab.n")
            seed = chrome(gr.Number(value=0, precision=0, label=t("lab.seed"), minimum=0), label="lab.seed")
            with gr.Row():
                lab_btn = chrome(gr.Button(t("lab.sample"), variant="primary", elem_id="lab-btn"), value="lab.sample")
                converge_btn = chrome(gr.Button(t("lab.converge"), elem_id="converge-btn"), value="lab.converge")
            status = gr.HTML("", elem_id="lab-status", padding=False)
        with gr.Column(scale=2, min_width=300):
            md = gr.Markdown()
            plot = chrome(gr.Plot(label=t("lab.plot"), elem_id="lab-plot"), label="lab.plot")
            with gr.Row():
                residual = chrome(gr.Plot(label=t("lab.residual"), min_width=280), label="lab.residual")
                tv = chrome(gr.Plot(label=t("lab.convergence"), min_width=280), label="lab.convergence")

    shown = [plot, residual, tv, md]
    # the API's inputs keep their order; the implementation is the last one (default: the correct rule)
    inputs = [table, lenience, n, seed, implementation]
    on(lab_btn.click, lab_run, inputs, shown, status, api_name="lab", queue=False)
    on(converge_btn.click, lab_converge, [table, lenience, seed, implementation], shown, status,
       api_name="lab_converge")
    # the table's new rows go out with the headers in the session's language (a list would take the English ones)
    on(normalize_btn.click, lambda rows: lab_table(lab_normalize(rows)), table, table, status, api_name=False,
       queue=False)
    # choosing an example or an implementation runs the lab at once (each step through the error boundary)
    picked = on(example.input, lambda key: lab_table(lab_example(key)), example, table, status, api_name=False,
                queue=False)
    on(picked.then, lab_run, inputs, shown, status, api_name=False, queue=False)
    switched = on(implementation.input, implementation_words, implementation, implementation_md, status,
                  api_name=False, queue=False)
    on(switched.then, lab_run, inputs, shown, status, api_name=False, queue=False)
    on(demo.load, lab_run, inputs, shown, status, clear=False, api_name=False, queue=False)
    # a new language: the table's headers (its rows kept), the implementation's words and the results again
    on_change(lab_table, table, table, status, on_load=True)
    on_change(implementation_words, implementation, implementation_md, status, on_load=True)
    on_change(lab_run, inputs, shown, status)
