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
from ..capacity import model_events
from ..controls import DEFAULTS, build_method_controls, control_order
from ..errors import CHEAP, on
from ..player import empty_data, player
from ..presets import presets
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


def precision_label() -> str:
    """The precision control's label, naming what "auto" means on this machine."""
    from decoding.lm.devices import default_dtype, dtype_name, resolve_device

    try:
        auto = dtype_name(default_dtype(resolve_device(None)))
    except Exception:  # noqa: BLE001 - a bad SPECDEC_DTYPE: the run reports it
        auto = "the device's default"
    return f"Precision of the models (auto = {auto} here)"


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
    gr.Markdown(texts.INTRO)
    # Run, Step, Stop and Reset with the status line: sticky, so they stay in view wherever
    # the panels are (app.css, "the run bar"); errors and "press Run" prompts appear here
    with gr.Column(elem_id="run-bar", elem_classes="run-bar"):
        with gr.Row(elem_classes="run-buttons"):
            run_btn = gr.Button("▶ Run", variant="primary", elem_id="run-btn", min_width=70)
            # an SVG icon: the "next track" glyph U+23ED is missing from common fonts (Debian's)
            step_btn = gr.Button("Step", icon=str(ASSETS / "icons" / "step.svg"), elem_id="step-btn", min_width=70)
            stop_btn = gr.Button("■ Stop", variant="stop", elem_id="stop-btn", min_width=70)
            reset_btn = gr.Button("↺ Reset", elem_id="reset-btn", min_width=70)
        run_status = gr.HTML("", elem_id="run-status", padding=False)
    with gr.Row(equal_height=False, elem_classes="mainrow"):
        with gr.Column(scale=1, min_width=300, elem_classes="controls"):
            preset = gr.Dropdown([p.label for p in pairs], value=pairs[0].label,
                                 label="Model pair (draft → target)", elem_id="preset")
            preset_note = gr.Markdown(pairs[0].note, elem_classes="note")
            custom_target = gr.Textbox("", label="Custom target (hub id)", visible=False,
                                       placeholder="HuggingFaceTB/SmolLM2-360M-Instruct")
            custom_draft = gr.Textbox(label="Custom draft (hub id, or prompt-lookup)", visible=False,
                                      value=PROMPT_LOOKUP)
            load_btn = gr.Button("Load models", size="sm")
            load_msg = gr.Markdown("", elem_classes="note")
            prompt = gr.Textbox(label="Prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                value=next(iter(EXAMPLE_PROMPTS.values()))[0])
            prompt_pick = gr.Dropdown(prompt_choices(), value=None, label="Example prompts and the task gallery")
            chat = gr.Checkbox(value=pairs[0].chat, label="Apply the chat template (instruct models)")
            method = gr.Dropdown(methods, value=method_default, label="Method", elem_id="method")
            pair_note = gr.Markdown("", elem_id="pair-note", elem_classes="note")
            gamma = gr.Slider(1, MAX_GAMMA, value=DEFAULTS["gamma"], step=1, label="γ (gamma): draft length")
            lenience = gr.Slider(0.05, 1.0, value=DEFAULTS["lenience"], step=0.05, label="Lenience l (1 = exact)")
            knobs = build_method_controls(method_default)  # each method's own settings (registry)
            temperature = gr.Slider(0.0, 2.0, value=DEFAULTS["temperature"], step=0.05,
                                    label="Temperature (0 = greedy)")
            top_k = gr.Slider(0, 100, value=DEFAULTS["top_k"], step=1, label="Top-k (0 = off)")
            top_p = gr.Slider(0.05, 1.0, value=DEFAULTS["top_p"], step=0.05, label="Top-p (1 = off)")
            with gr.Row():
                seed = gr.Number(value=DEFAULTS["seed"], precision=0, label="Seed", minimum=0)
                max_new = gr.Slider(1, MAX_NEW_TOKENS, value=DEFAULTS["max_new_tokens"], step=1,
                                    label="Max new tokens")
            dtype = gr.Dropdown(list(PRECISIONS), value=DEFAULTS["dtype"], label=precision_label(),
                                info="bfloat16 makes the verify pass cheap on CPUs with native bf16; "
                                     "float32 is the reference for exactness")
            with gr.Accordion("Is it still exact in bfloat16?", open=False):
                gr.Markdown(texts.bf16_exactness_sentence(), elem_classes="note")
            pacing = gr.Slider(0.0, 2.0, value=DEFAULTS["pacing"], step=0.05,
                               label="Pacing: seconds per iteration (0 = as fast as it decodes)",
                               info="Above 0 the run decodes at full speed, then plays in your browser "
                                    "at this pace (the player above the panels)")
            with gr.Accordion("Save or open a run", open=False):
                panels["download"] = gr.DownloadButton("Download this run (.jsonl trace)", interactive=False)
                upload = gr.UploadButton("Open a trace file (.jsonl)", file_types=[".jsonl", ".json", ".txt"])
                example_pick = gr.Dropdown(list(examples), value=None, label="Example traces (no model needed)")
            # the one place a command is shown on purpose: labelled for researchers, closed by default
            with gr.Accordion("For researchers: this run from the command line", open=False,
                              elem_classes="for-researchers"):
                panels["cli"] = gr.Code(label="Copy as CLI command", language="shell", lines=3, interactive=False)
        with gr.Column(scale=2, min_width=320, elem_classes="panels"):
            panels["playback"] = player(empty_data(PLAYBACK_IDLE), elem_id="explainer-player",
                                        label="Playback in the browser")
            panels["stats"] = gr.HTML(label="Run statistics", elem_id="stats")
            with gr.Row(equal_height=True):
                panels["timeline"] = gr.Slider(1, 2, value=1, step=1, label="Timeline: iteration", scale=3,
                                               elem_id="timeline")
                position = gr.Number(value=0, precision=0, minimum=0, maximum=MAX_GAMMA, scale=1,
                                     label="Draft position for p vs q (0 = first rejection)")
            panels["iter_caption"] = gr.Markdown(elem_classes="caption")
            gr.HTML(render.legend_html(), label="Legend")
            panels["chips"] = gr.HTML(label="Text so far, as token chips", elem_id="chips")
            with gr.Accordion("What do the chips mean?", open=False):
                gr.Markdown(texts.CHIPS)
            panels["text"] = gr.Textbox(label="Generated text", lines=3, interactive=False, buttons=["copy"])
            panels["draft_row"] = gr.HTML(label="This iteration's draft", elem_id="draft-row")
            with gr.Accordion("How to read the draft row", open=False):
                gr.Markdown(texts.DRAFT_ROW)
            # the panel of the shown run's method (its registry entry's trace data); hidden for the others
            with gr.Column(visible=False, elem_id="method-panel", elem_classes="methodpanel") as method_box:
                panels["method_box"] = method_box
                panels["method_md"] = gr.Markdown(elem_classes="explain")
                with gr.Row(elem_classes="plots"):
                    with gr.Column(min_width=300):
                        panels["method_plot"] = gr.Plot(label="Method panel", elem_id="method-plot")
                    with gr.Column(min_width=300, visible=False) as method_col2:
                        panels["method_col2"] = method_col2
                        panels["method_plot2"] = gr.Plot(label="Output distribution of one mentored step vs p and q",
                                                         elem_id="method-plot2")
                panels["method_html"] = gr.HTML(label="Method details", elem_id="method-html")
            with gr.Row(elem_classes="plots"):
                with gr.Column(min_width=300):
                    panels["pq_plot"] = gr.Plot(label="p (target) vs q (draft) at one draft position",
                                                elem_id="pq-plot")
                    gr.Markdown(texts.PQ, elem_classes="explain")
                with gr.Column(min_width=300):
                    panels["residual_plot"] = gr.Plot(label="Residual distribution", elem_id="residual-plot")
                    gr.Markdown(texts.RESIDUAL, elem_classes="explain")
            panels["tree"] = gr.HTML(label="Draft tree", elem_id="tree")
            gr.Markdown(texts.TREE, elem_classes="explain")
            panels["running"] = gr.Plot(label="Running charts", elem_id="running-plot")
            gr.Markdown(texts.RUNNING, elem_classes="explain")
            with gr.Accordion("Theory: expected speed-up vs γ", open=True):
                panels["theory_plot"] = gr.Plot(label="Theory vs γ", elem_id="theory-plot")
                panels["theory_md"] = gr.Markdown()
                gr.Markdown(texts.THEORY, elem_classes="explain")

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
                       dict(model_events(), show_progress_on=[run_status]), [])

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
    return tab


def stop_cancels(tab: ExplainerTab, events: list) -> None:
    """Stop: the browser player pauses (player.js), and `events` (the model events of every tab) in the
    queue are cancelled; the iterations so far stay on the timeline."""
    tab.stop_btn.click(None, None, None, js=PAUSE_JS, **CHEAP)
    on(tab.stop_btn.click, stop, [tab.state, tab.position], [tab.state, *tab.view_outputs], tab.status,
       cancels=events, **CHEAP)
