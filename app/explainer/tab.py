"""The Explainer tab's layout and the wiring of its events.

`build` lays the tab out (call it inside `gr.Tab("Explainer")`) and wires its own events (Run, Step,
Reset, the timeline, the player, opening traces, the pair and method controls); `stop_cancels` wires
Stop once every event it cancels exists (the Race tab's too). The panels are created under the names
of `view.VIEW_OUTPUTS`, and the view outputs' list is read off those names, so the handlers' outputs
and the layout cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from decoding.methods.registry import METHODS
from decoding.paths import ASSETS
from decoding.run.pair import PROMPT_LOOKUP

from .. import render, texts
from ..i18n import t
from ..i18n.ui import chrome, on_change
from .. import export
from ..share import LINK_JS, explainer_figure, run_link
from ..capacity import model_events
from ..controls import DEFAULTS, build_method_controls, control_order
from ..errors import CHEAP, on
from ..player import empty_data, player
from ..preset_labels import pair_choices
from ..presets import preset_note as preset_note_text, presets
from ..session import example_traces
from ..settings import MAX_GAMMA, MAX_NEW_TOKENS, MAX_PROMPT_CHARS, PRECISIONS
from .handlers import (EXAMPLE_PROMPTS, follow_player, generate, load_models, on_load, on_method, on_method_input,
                       on_preset, on_preset_input, on_prompt_pick, open_example, open_trace, prompt_choices, reset,
                       show_iteration, show_position, step, stop)
from .playback import PLAYBACK_IDLE
from .view import VIEW_OUTPUTS

# the timeline moved: the Explainer's player shows the same iteration (player.js); Stop pauses it
SEEK_JS = ("(t) => { document.dispatchEvent(new CustomEvent('specdec-seek', "
           "{detail: {player: 'explainer', iteration: Number(t) - 1}})); }")
PAUSE_JS = "() => { document.dispatchEvent(new CustomEvent('specdec-pause', {detail: {player: 'explainer'}})); }"


def precision_label(lang: str | None = "en") -> str:
    """The precision control's label, naming what "auto" means on this machine."""
    from decoding.lm.devices import default_dtype, dtype_name, resolve_device

    try:
        auto = dtype_name(default_dtype(resolve_device(None)))
    except Exception:  # noqa: BLE001 - a bad SPECDEC_DTYPE: the run reports it
        auto = t("explainer.label.device_default", lang)
    return t("explainer.label.precision", lang, auto=auto)


def texted(component, **keys):
    """`component` with its texts registered for the language menu (`i18n.ui.chrome`): each keyword
    is a property (label, info, value, placeholder) and its catalog key under `explainer.`, or a
    function lang -> text. The component was built with the English texts."""
    return chrome(component, **{prop: (key if callable(key) else "explainer." + key) for prop, key in keys.items()})


def en(key: str, **params) -> str:
    """The English text of `explainer.<key>`: what a component is built with, before the page's
    language is known (the page's load sets it, `i18n.ui`)."""
    return t("explainer." + key, "en", **params)


def default_method() -> str:
    methods = list(METHODS)
    return DEFAULTS["method"] if DEFAULTS["method"] in methods else methods[0]


@dataclass
class ExplainerTab:
    """What the other tabs reach: the run inputs by their api names (`components`: the pair, prompt,
    method, knobs, ..., the autorun flag), the view's outputs in `VIEW_OUTPUTS` order, the controls in
    `controls.control_order`, the status line, the run events' settings and the model events Stop cancels."""

    state: gr.State
    components: dict
    view_outputs: list
    controls: list
    status: gr.HTML
    pair_note: gr.Markdown
    stop_btn: gr.Button
    position: gr.Number
    run_events: dict
    model_events: list  # Run and Step: what Stop cancels
    link_notice: gr.HTML = None  # what a link opened, or why it could not (app/share.py)

    def inputs(self, handler) -> list:
        """The components of a handler's inputs, by its api names (controls.with_run_inputs)."""
        return [self.state] + [self.components[name] for name in handler.input_names]


def build(demo: gr.Blocks, state: gr.State, autorun: gr.State) -> ExplainerTab:
    """The tab's components and its own events. `autorun`: a lesson chapter's "Run it live" asked for
    a run (app/lesson/tab.py)."""
    methods = list(METHODS)
    method_default = default_method()
    examples = example_traces()
    pairs = presets()
    panels = {}  # the view's outputs by name (view.VIEW_OUTPUTS)
    texted(gr.Markdown(en("text.intro")), value="text.intro")
    # what a link opened (or why it could not be opened): app/share.py
    link_notice = gr.HTML("", elem_id="explainer-link-notice", padding=False)
    # Run, Step, Stop and Reset with the status line: sticky, so they stay in view wherever
    # the panels are (app.css, "the run bar"); errors and "press Run" prompts appear here
    with gr.Column(elem_id="run-bar", elem_classes="run-bar"):
        with gr.Row(elem_classes="run-buttons"):
            run_btn = texted(gr.Button(en("button.run"), variant="primary", elem_id="run-btn", min_width=70),
                             value="button.run")
            # an SVG icon: the "next track" glyph U+23ED is missing from common fonts (Debian's)
            step_btn = texted(gr.Button(en("button.step"), icon=str(ASSETS / "icons" / "step.svg"), elem_id="step-btn",
                                        min_width=70), value="button.step")
            stop_btn = texted(gr.Button(en("button.stop"), variant="stop", elem_id="stop-btn", min_width=70),
                              value="button.stop")
            reset_btn = texted(gr.Button(en("button.reset"), elem_id="reset-btn", min_width=70), value="button.reset")
        run_status = gr.HTML("", elem_id="run-status", padding=False)
    with gr.Row(equal_height=False, elem_classes="mainrow"):
        with gr.Column(scale=1, min_width=300, elem_classes="controls"):
            labels = [p.label for p in pairs]  # the values; the menu shows each in the page's language
            preset = texted(gr.Dropdown(pair_choices(labels, "en"), value=pairs[0].label,
                                        label=en("label.preset"), elem_id="preset"), label="label.preset",
                            choices=lambda lang: pair_choices(labels, lang))
            # the first pair's note on load; the language menu's re-render (on_change below) says the chosen pair's
            preset_note = texted(gr.Markdown(preset_note_text(pairs[0], "en"), elem_classes="note"),
                                 value=lambda lang: preset_note_text(pairs[0], lang))
            custom_target = texted(gr.Textbox("", label=en("label.custom_target"), visible=False,
                                              placeholder="HuggingFaceTB/SmolLM2-360M-Instruct"),
                                   label="label.custom_target")
            custom_draft = texted(gr.Textbox(label=en("label.custom_draft"), visible=False, value=PROMPT_LOOKUP),
                                  label="label.custom_draft")
            load_btn = texted(gr.Button(en("button.load"), size="sm"), value="button.load")
            load_msg = gr.Markdown("", elem_classes="note")
            prompt = texted(gr.Textbox(label=en("label.prompt"), lines=3, max_length=MAX_PROMPT_CHARS,
                                       value=next(iter(EXAMPLE_PROMPTS.values()))[0]), label="label.prompt")
            prompt_pick = texted(gr.Dropdown(prompt_choices(), value=None, label=en("label.prompt_pick")),
                                 label="label.prompt_pick")
            chat = texted(gr.Checkbox(value=pairs[0].chat, label=en("label.chat")), label="label.chat")
            method = texted(gr.Dropdown(methods, value=method_default, label=en("label.method"), elem_id="method"),
                            label="label.method")
            pair_note = gr.Markdown("", elem_id="pair-note", elem_classes="note")
            gamma = texted(gr.Slider(1, MAX_GAMMA, value=DEFAULTS["gamma"], step=1, label=en("label.gamma")),
                           label="label.gamma")
            lenience = texted(gr.Slider(0.05, 1.0, value=DEFAULTS["lenience"], step=0.05, label=en("label.lenience")),
                              label="label.lenience")
            knobs = build_method_controls(method_default)  # each method's own settings (registry)
            temperature = texted(gr.Slider(0.0, 2.0, value=DEFAULTS["temperature"], step=0.05,
                                           label=en("label.temperature")), label="label.temperature")
            top_k = texted(gr.Slider(0, 100, value=DEFAULTS["top_k"], step=1, label=en("label.top_k")),
                           label="label.top_k")
            top_p = texted(gr.Slider(0.05, 1.0, value=DEFAULTS["top_p"], step=0.05, label=en("label.top_p")),
                           label="label.top_p")
            with gr.Row():
                seed = texted(gr.Number(value=DEFAULTS["seed"], precision=0, label=en("label.seed"), minimum=0),
                              label="label.seed")
                max_new = texted(gr.Slider(1, MAX_NEW_TOKENS, value=DEFAULTS["max_new_tokens"], step=1,
                                           label=en("label.max_new")), label="label.max_new")
            dtype = texted(gr.Dropdown(list(PRECISIONS), value=DEFAULTS["dtype"], label=precision_label(),
                                       info=en("label.precision_info")),
                           label=precision_label, info="label.precision_info")
            with gr.Accordion(en("label.bf16"), open=False) as bf16:
                texted(bf16, label="label.bf16")
                texted(gr.Markdown(texts.bf16_exactness_sentence("en"), elem_classes="note"),
                       value=texts.bf16_exactness_sentence)
            pacing = texted(gr.Slider(0.0, 2.0, value=DEFAULTS["pacing"], step=0.05, label=en("label.pacing"),
                                      info=en("label.pacing_info")), label="label.pacing", info="label.pacing_info")
            with gr.Accordion(en("label.save_open"), open=False) as save_open:
                texted(save_open, label="label.save_open")
                # a download or upload button's text is its label (its value is the file)
                panels["download"] = texted(gr.DownloadButton(en("button.download"), interactive=False),
                                            label="button.download")
                upload = texted(gr.UploadButton(en("button.upload"), file_types=[".jsonl", ".json", ".txt"]),
                                label="button.upload")
                example_pick = texted(gr.Dropdown(list(examples), value=None, label=en("label.examples")),
                                      label="label.examples")
            share = build_share()
            # the one place a command is shown on purpose: labelled for researchers, closed by default
            with gr.Accordion(en("label.researchers"), open=False, elem_classes="for-researchers") as researchers:
                texted(researchers, label="label.researchers")
                panels["cli"] = texted(gr.Code(label=en("label.cli"), language="shell", lines=3, interactive=False),
                                       label="label.cli")
        with gr.Column(scale=2, min_width=320, elem_classes="panels"):
            panels["playback"] = player(empty_data(PLAYBACK_IDLE), elem_id="explainer-player",
                                        label="Playback in the browser")
            panels["stats"] = texted(gr.HTML(label=en("label.stats"), elem_id="stats"), label="label.stats")
            with gr.Row(equal_height=True):
                panels["timeline"] = texted(gr.Slider(1, 2, value=1, step=1, label=en("label.timeline"), scale=3,
                                                      elem_id="timeline"), label="label.timeline")
                position = texted(gr.Number(value=0, precision=0, minimum=0, maximum=MAX_GAMMA, scale=1,
                                            label=en("label.position")), label="label.position")
            panels["iter_caption"] = gr.Markdown(elem_classes="caption")
            texted(gr.HTML(render.legend_html("en"), label=en("label.legend")), label="label.legend",
                   value=render.legend_html)
            panels["chips"] = texted(gr.HTML(label=en("label.chips"), elem_id="chips"), label="label.chips")
            with gr.Accordion(en("label.chips_help"), open=False) as chips_help:
                texted(chips_help, label="label.chips_help")
                texted(gr.Markdown(en("text.chips")), value="text.chips")
            panels["text"] = texted(gr.Textbox(label=en("label.text"), lines=3, interactive=False, buttons=["copy"],
                                               elem_id="generated-text"), label="label.text")
            panels["draft_row"] = texted(gr.HTML(label=en("label.draft_row"), elem_id="draft-row"),
                                         label="label.draft_row")
            with gr.Accordion(en("label.draft_row_help"), open=False) as draft_help:
                texted(draft_help, label="label.draft_row_help")
                texted(gr.Markdown(en("text.draft_row")), value="text.draft_row")
            # the panel of the shown run's method (its registry entry's trace data); hidden for the others
            with gr.Column(visible=False, elem_id="method-panel", elem_classes="methodpanel") as method_box:
                panels["method_box"] = method_box
                panels["method_md"] = gr.Markdown(elem_classes="explain")
                with gr.Row(elem_classes="plots"):
                    with gr.Column(min_width=300):
                        panels["method_plot"] = gr.Plot(label=en("label.method_plot"), elem_id="method-plot")
                    with gr.Column(min_width=300, visible=False) as method_col2:
                        panels["method_col2"] = method_col2
                        panels["method_plot2"] = texted(gr.Plot(label=en("label.method_plot2"), elem_id="method-plot2"),
                                                        label="label.method_plot2")
                panels["method_html"] = texted(gr.HTML(label=en("label.method_html"), elem_id="method-html"),
                                               label="label.method_html")
            with gr.Row(elem_classes="plots"):
                with gr.Column(min_width=300):
                    panels["pq_plot"] = texted(gr.Plot(label=en("label.pq_plot"), elem_id="pq-plot"),
                                               label="label.pq_plot")
                    texted(gr.Markdown(en("text.pq"), elem_classes="explain"), value="text.pq")
                with gr.Column(min_width=300):
                    panels["residual_plot"] = texted(gr.Plot(label=en("label.residual_plot"), elem_id="residual-plot"),
                                                     label="label.residual_plot")
                    texted(gr.Markdown(en("text.residual"), elem_classes="explain"), value="text.residual")
            panels["tree"] = texted(gr.HTML(label=en("label.tree"), elem_id="tree"), label="label.tree")
            texted(gr.Markdown(en("text.tree"), elem_classes="explain"), value="text.tree")
            panels["running"] = texted(gr.Plot(label=en("label.running"), elem_id="running-plot"),
                                       label="label.running")
            texted(gr.Markdown(en("text.running"), elem_classes="explain"), value="text.running")
            with gr.Accordion(en("label.theory"), open=True) as theory:
                texted(theory, label="label.theory")
                panels["theory_plot"] = texted(gr.Plot(label=en("label.theory_plot"), elem_id="theory-plot"),
                                               label="label.theory_plot")
                panels["theory_md"] = gr.Markdown()
                texted(gr.Markdown(en("text.theory"), elem_classes="explain"), value="text.theory")

    view_outputs = [panels[name] for name in VIEW_OUTPUTS]
    components = {"preset": preset, "custom_target": custom_target, "custom_draft": custom_draft,
                  "prompt": prompt, "chat": chat, "method": method, "gamma": gamma, "temperature": temperature,
                  "top_k": top_k, "top_p": top_p, "lenience": lenience, "seed": seed, "max_new_tokens": max_new,
                  "dtype": dtype, "pacing": pacing, "position": position, "autorun": autorun, **knobs}
    tab = ExplainerTab(state, components, view_outputs, [components[name] for name in control_order()],
                       run_status, pair_note, stop_btn, position,
                       # a run's progress (loading the models, decoding N of M tokens) shows in the status line
                       # only: a progress overlay and timer on every panel cost the browser as much as a fifth
                       # of a decode on the same machine (scripts/bench_pacing.py), and the panels say what is
                       # decoded
                       dict(model_events(), show_progress_on=[run_status]), [], link_notice)

    shown = [state, *view_outputs]
    tab.model_events += [
        on(run_btn.click, generate, tab.inputs(generate), shown, run_status, api_name="generate", **tab.run_events),
        on(step_btn.click, step, tab.inputs(step), shown, run_status, api_name="step", **tab.run_events)]
    on(reset_btn.click, reset, [state, position], shown, run_status, api_name=False)
    # cheap events run outside the queue: they never wait behind model runs nor count against them.
    # One timeline: the timeline moves the player (its JavaScript), the player moves the panels
    # (its "select" event, as it plays), and both render the panels outside the queue
    timeline = panels["timeline"]
    timeline.input(None, timeline, None, js=SEEK_JS, **CHEAP)
    on(timeline.input, show_iteration, [state, timeline, position], view_outputs, run_status, clear=False,
       trigger_mode="always_last", **CHEAP)
    # every report runs ("always_last" would rerun a pending report with the previous report's data):
    # the player sends the next one only once the panels have answered the last (player.js)
    on(panels["playback"].select, follow_player, [state, position], view_outputs, run_status, clear=False,
       trigger_mode="multiple", **CHEAP)
    on(position.change, show_position, [state, timeline, position], [panels["pq_plot"], panels["method_plot2"]],
       run_status, clear=False, **CHEAP)
    opened = [*shown, *tab.controls, preset, pair_note]
    on(upload.upload, open_trace, [state, upload, position, preset, custom_draft], opened, run_status, **CHEAP)
    on(example_pick.input, open_example, [state, example_pick, position, preset, custom_draft], opened,
       run_status, **CHEAP)
    on(load_btn.click, load_models, [preset, custom_target, custom_draft, dtype], load_msg, run_status,
       api_name=False, **tab.run_events)
    on(prompt_pick.input, on_prompt_pick, prompt_pick, [prompt, chat], run_status, clear=False, api_name=False)
    on(preset.change, on_preset, preset, [custom_target, custom_draft, preset_note], run_status, clear=False,
       api_name=False)
    on(preset.input, on_preset_input, [preset, method, custom_draft], [chat, pair_note, components["draft_tree"]],
       run_status, clear=False,
       **CHEAP)
    toggled = ("gamma", "lenience", *knobs)
    on(method.change, lambda m: on_method(m, toggled), method, [components[n] for n in toggled], run_status,
       clear=False, api_name=False)
    # a method the pair cannot run picks a pair that can, before Run (presets.fitting_preset)
    on(method.input, on_method_input, [method, preset, custom_draft], [preset, pair_note], run_status,
       clear=False, **CHEAP)
    on(demo.load, on_load, [state, position], shown, run_status, clear=False, api_name=False, queue=False)
    # the language menu changed: every panel of the shown iteration again, in the new language
    on_change(show_iteration, [state, timeline, position], view_outputs, run_status)
    on_change(on_preset, preset, [custom_target, custom_draft, preset_note], run_status)  # the pair's note
    wire_share(share, state, panels["timeline"], position, link_notice)
    return tab


def build_share() -> dict:
    """The menu of figures for slides and the run's link (call inside the controls column); its texts
    follow the page's language (`i18n.ui.chrome`)."""
    with gr.Accordion(t("export.menu.title", "en"), open=False, elem_id="explainer-share") as box:
        chrome(box, label="export.menu.title")
        panel = chrome(gr.Dropdown(export.panel_choices(export.EXPLAINER_PANELS, "en"), value="chips",
                                   label=t("export.menu.panel", "en"), elem_id="explainer-export-panel"),
                       label="export.menu.panel",
                       choices=lambda lang: export.panel_choices(export.EXPLAINER_PANELS, lang))
        fmt = chrome(gr.Radio([("SVG", "svg"), ("PNG", "png")], value="svg", label=t("export.menu.format", "en"),
                              elem_id="explainer-export-format"), label="export.menu.format")
        make = chrome(gr.Button(t("export.menu.button", "en"), size="sm", elem_id="explainer-export-btn"),
                      value="export.menu.button")
        note = chrome(gr.Markdown(t("export.menu.note", "en"), elem_classes="note"), value="export.menu.note")
        file = chrome(gr.File(label=t("export.menu.file", "en"), visible=False, interactive=False,
                              elem_id="explainer-export-file"), label="export.menu.file")
        link_btn = chrome(gr.Button(t("export.link.button", "en"), size="sm", elem_id="explainer-link-btn"),
                          value="export.link.button")
        query = gr.Textbox(visible=False, elem_id="explainer-link-query")
        link = chrome(gr.Textbox(label=t("export.link.label", "en"), info=t("export.link.info", "en"),
                                 interactive=False, buttons=["copy"], elem_id="explainer-link"),
                      label="export.link.label", info="export.link.info")
    return dict(box=box, panel=panel, fmt=fmt, make=make, note=note, file=file, link_btn=link_btn, query=query,
                link=link)


def wire_share(share: dict, state, timeline, position, link_notice) -> None:
    """The figure menu (cheap: drawn from the records shown) and the link button (its address built in
    the browser, app/share.LINK_JS)."""
    on(share["make"].click, explainer_figure, [state, share["panel"], share["fmt"], timeline, position],
       [share["file"], share["note"]], link_notice, clear=False, **CHEAP)
    made = on(share["link_btn"].click, run_link, state, share["query"], link_notice, **CHEAP)
    made.then(None, share["query"], share["link"], js=LINK_JS, **CHEAP)


def stop_cancels(tab: ExplainerTab, events: list) -> None:
    """Stop: the browser player pauses (player.js), and `events` (the model events of every tab) in the
    queue are cancelled; the iterations so far stay on the timeline."""
    tab.stop_btn.click(None, None, None, js=PAUSE_JS, **CHEAP)
    on(tab.stop_btn.click, stop, [tab.state, tab.position], [tab.state, *tab.view_outputs], tab.status,
       cancels=events, **CHEAP)
