"""The Gradio Blocks: the layout of the tabs and the wiring of their events.

Handlers live in `handlers.py` (explainer), `lab_events.py` (exactness lab), `race.py` (the race,
played in the browser by `player.py`) and `compare.py` (the plain comparison table inside the race
tab); the method controls come from the registry (`controls.py`). Events that touch
models share one concurrency group whose slots `capacity.py` sizes (on a CPU, eight runs sharing
batched forward passes); cheap events (page load,
the lab, opening a trace, the timeline) skip the queue; the queue is bounded. Per-user state is a
`Session` in a gr.State with a time to live.
"""

from __future__ import annotations

import gradio as gr

from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB
from decoding.methods.registry import METHODS, baseline_method
from decoding.run.pair import PROMPT_LOOKUP
from decoding.paths import APP_CSS, ASSETS

from . import render, texts
from .compare import compare
from .capacity import QUEUE_SIZE, SESSION_CAPACITY, model_slots
from .controls import DEFAULTS, build_method_controls, control_order
from .errors import guard
from .handlers import (EXAMPLE_PROMPTS, follow_player, generate, load_models, on_load, on_method,
                       on_method_input, on_preset, on_preset_input, on_prompt_pick, open_example, open_trace,
                       prompt_choices, reset, run_if_asked, show_iteration, show_position, step, stop)
from .lab_events import lab_converge, lab_normalize, lab_run
from . import lesson_tab
from .gallery import DEFAULT_DRAFTER, DEFAULT_GAMMA, DRAFTERS, gallery_choices
from .playback import PLAYBACK_IDLE
from .player import empty_data, player
from .presets import presets
from .race import NO_RACE, on_gallery_pick, on_lane_a, open_race_upload, open_shipped_race, race, race_on_load
from .race_file import shipped_races
from .session import SESSION_TTL_SECONDS, delete_session, example_traces
from .theme import app_theme
from .view import VIEW_OUTPUTS
from .settings import MAX_GAMMA, MAX_NEW_TOKENS, MAX_PROMPT_CHARS, PRECISIONS


def precision_label() -> str:
    """The precision control's label, naming what "auto" means on this machine."""
    from decoding.lm.devices import default_dtype, dtype_name, resolve_device

    try:
        auto = dtype_name(default_dtype(resolve_device(None)))
    except Exception:  # noqa: BLE001 - a bad SPECDEC_DTYPE: the run reports it
        auto = "the device's default"
    return f"Precision of the models (auto = {auto} here)"

# the timeline moved: the Explainer's player shows the same iteration (player.js); Stop pauses it
SEEK_JS = ("(t) => { document.dispatchEvent(new CustomEvent('specdec-seek', "
           "{detail: {player: 'explainer', iteration: Number(t) - 1}})); }")
PAUSE_JS = "() => { document.dispatchEvent(new CustomEvent('specdec-pause', {detail: {player: 'explainer'}})); }"

APP_JS = ASSETS / "app.js"


def build_demo() -> gr.Blocks:
    methods = list(METHODS)
    default_method = DEFAULTS["method"] if DEFAULTS["method"] in methods else methods[0]
    examples = example_traces()
    PRESETS = presets()
    with gr.Blocks(title="Speculative decoding playground") as demo:
        state = gr.State(None, time_to_live=SESSION_TTL_SECONDS, delete_callback=delete_session)
        autorun = gr.State(False)  # a lesson chapter's "Run it live" asked for a run (lesson_tab.wire)
        gr.Markdown("# Speculative decoding playground", elem_id="app-title")  # the page's one h1
        # "wrap": on a phone every tab stays on the bar (a second row), none behind a "..." menu
        with gr.Tabs(elem_id="main-tabs", selected="lesson", overflow_behavior="wrap") as tabs:
            # ---------------------------------------------------------------- lesson (lesson_tab.py)
            with gr.Tab("Lesson", id="lesson"):
                lesson = lesson_tab.build()

            # ---------------------------------------------------------------- explainer
            with gr.Tab("Explainer", id="explainer"):
                gr.Markdown(texts.INTRO)
                # Run, Step, Stop and Reset with the status line: sticky, so they stay in view wherever
                # the panels are (app.css, "the run bar"); errors and "press Run" prompts appear here
                with gr.Column(elem_id="run-bar", elem_classes="run-bar"):
                    with gr.Row(elem_classes="run-buttons"):
                        run_btn = gr.Button("▶ Run", variant="primary", elem_id="run-btn", min_width=70)
                        # an SVG icon: the "next track" glyph U+23ED is missing from common fonts (Debian's)
                        step_btn = gr.Button("Step", icon=str(ASSETS / "icons" / "step.svg"), elem_id="step-btn",
                                             min_width=70)
                        stop_btn = gr.Button("■ Stop", variant="stop", elem_id="stop-btn", min_width=70)
                        reset_btn = gr.Button("↺ Reset", elem_id="reset-btn", min_width=70)
                    run_status = gr.HTML("", elem_id="run-status", padding=False)
                with gr.Row(equal_height=False, elem_classes="mainrow"):
                    with gr.Column(scale=1, min_width=300, elem_classes="controls"):
                        preset = gr.Dropdown([p.label for p in PRESETS], value=PRESETS[0].label,
                                             label="Model pair (draft → target)", elem_id="preset")
                        preset_note = gr.Markdown(PRESETS[0].note, elem_classes="note")
                        custom_target = gr.Textbox("", label="Custom target (hub id)", visible=False,
                                                   placeholder="HuggingFaceTB/SmolLM2-360M-Instruct")
                        custom_draft = gr.Textbox(label="Custom draft (hub id, or prompt-lookup)", visible=False,
                                                  value=PROMPT_LOOKUP)
                        load_btn = gr.Button("Load models", size="sm")
                        load_msg = gr.Markdown("", elem_classes="note")
                        prompt = gr.Textbox(label="Prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                            value=next(iter(EXAMPLE_PROMPTS.values()))[0])
                        prompt_pick = gr.Dropdown(prompt_choices(), value=None, label="Example prompts and the task gallery")
                        chat = gr.Checkbox(value=PRESETS[0].chat, label="Apply the chat template (instruct models)")
                        method = gr.Dropdown(methods, value=default_method, label="Method", elem_id="method")
                        pair_note = gr.Markdown("", elem_id="pair-note", elem_classes="note")
                        gamma = gr.Slider(1, MAX_GAMMA, value=DEFAULTS["gamma"], step=1,
                                          label="γ (gamma): draft length")
                        lenience = gr.Slider(0.05, 1.0, value=DEFAULTS["lenience"], step=0.05,
                                             label="Lenience l (1 = exact)")
                        knobs = build_method_controls(default_method)  # each method's own settings (registry)
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
                            download = gr.DownloadButton("Download this run (.jsonl trace)", interactive=False)
                            upload = gr.UploadButton("Open a trace file (.jsonl)", file_types=[".jsonl", ".json", ".txt"])
                            example_pick = gr.Dropdown(list(examples), value=None, label="Example traces (no model needed)")
                        # the one place a command is shown on purpose: labelled for researchers, closed by default
                        with gr.Accordion("For researchers: this run from the command line", open=False,
                                          elem_classes="for-researchers"):
                            cli = gr.Code(label="Copy as CLI command", language="shell", lines=3, interactive=False)
                    with gr.Column(scale=2, min_width=320, elem_classes="panels"):
                        playback = player(empty_data(PLAYBACK_IDLE), elem_id="explainer-player",
                                          label="Playback in the browser")
                        stats = gr.HTML(label="Run statistics", elem_id="stats")
                        with gr.Row(equal_height=True):
                            timeline = gr.Slider(1, 2, value=1, step=1, label="Timeline: iteration", scale=3,
                                                 elem_id="timeline")
                            position = gr.Number(value=0, precision=0, minimum=0, maximum=MAX_GAMMA, scale=1,
                                                 label="Draft position for p vs q (0 = first rejection)")
                        iter_caption = gr.Markdown(elem_classes="caption")
                        gr.HTML(render.legend_html(), label="Legend")
                        chips = gr.HTML(label="Text so far, as token chips", elem_id="chips")
                        with gr.Accordion("What do the chips mean?", open=False):
                            gr.Markdown(texts.CHIPS)
                        text = gr.Textbox(label="Generated text", lines=3, interactive=False, buttons=["copy"])
                        draft_row = gr.HTML(label="This iteration's draft", elem_id="draft-row")
                        with gr.Accordion("How to read the draft row", open=False):
                            gr.Markdown(texts.DRAFT_ROW)
                        # the panel of the shown run's method (mentored, MJSD, PPD); hidden for the others
                        with gr.Column(visible=False, elem_id="method-panel", elem_classes="methodpanel") as method_box:
                            method_md = gr.Markdown(elem_classes="explain")
                            with gr.Row(elem_classes="plots"):
                                with gr.Column(min_width=300):
                                    method_plot = gr.Plot(label="Method panel", elem_id="method-plot")
                                with gr.Column(min_width=300, visible=False) as method_col2:
                                    method_plot2 = gr.Plot(label="Output distribution of one mentored step vs p and q",
                                                           elem_id="method-plot2")
                            method_html = gr.HTML(label="Method details", elem_id="method-html")
                        with gr.Row(elem_classes="plots"):
                            with gr.Column(min_width=300):
                                pq_plot = gr.Plot(label="p (target) vs q (draft) at one draft position", elem_id="pq-plot")
                                gr.Markdown(texts.PQ, elem_classes="explain")
                            with gr.Column(min_width=300):
                                residual_plot = gr.Plot(label="Residual distribution", elem_id="residual-plot")
                                gr.Markdown(texts.RESIDUAL, elem_classes="explain")
                        tree = gr.HTML(label="Draft tree", elem_id="tree")
                        gr.Markdown(texts.TREE, elem_classes="explain")
                        running = gr.Plot(label="Running charts", elem_id="running-plot")
                        gr.Markdown(texts.RUNNING, elem_classes="explain")
                        with gr.Accordion("Theory: expected speed-up vs γ", open=True):
                            theory_plot = gr.Plot(label="Theory vs γ", elem_id="theory-plot")
                            theory_md = gr.Markdown()
                            gr.Markdown(texts.THEORY, elem_classes="explain")

            # ---------------------------------------------------------------- lab
            with gr.Tab("Exactness lab", id="lab"):
                gr.Markdown(texts.LAB)
                with gr.Row(equal_height=False):
                    with gr.Column(scale=1, min_width=280):
                        table = gr.Dataframe(
                            value=[[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)],
                            headers=["token", "p (target)", "q (draft)"], datatype=["str", "number", "number"],
                            type="array", interactive=True, label="Vocabulary, p and q (add or delete rows)",
                            elem_id="lab-table",
                        )
                        normalize_btn = gr.Button("Normalise p and q to sum to 1", size="sm")
                        lab_lenience = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Lenience l (1 = exact)")
                        lab_n = gr.Dropdown([100, 1_000, 10_000, 100_000, 1_000_000], value=10_000, label="N steps")
                        lab_seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                        with gr.Row():
                            lab_btn = gr.Button("Sample N", variant="primary", elem_id="lab-btn")
                            converge_btn = gr.Button("Watch it converge", elem_id="converge-btn")
                        lab_status = gr.HTML("", elem_id="lab-status", padding=False)
                    with gr.Column(scale=2, min_width=300):
                        lab_md = gr.Markdown()
                        lab_plot = gr.Plot(label="Empirical vs expected distribution", elem_id="lab-plot")
                        with gr.Row():
                            lab_res = gr.Plot(label="Residual", min_width=280)
                            lab_tv = gr.Plot(label="Convergence", min_width=280)

            # ---------------------------------------------------------------- race
            with gr.Tab("Race", id="race"):
                gr.Markdown(texts.RACE)
                with gr.Row(equal_height=False, elem_classes="mainrow"):
                    with gr.Column(scale=1, min_width=280, elem_classes="controls"):
                        races = list(shipped_races())
                        shipped_pick = gr.Dropdown(races, value=None, elem_id="shipped-races",
                                                   label="Shipped races (replay at once, no model needed)",
                                                   info=None if races else "No race ships with this copy of the app.")
                        gallery_pick = gr.Dropdown(gallery_choices(), value=None, label="Task gallery",
                                                   elem_id="gallery-pick")
                        gallery_note = gr.Markdown("", elem_classes="note")
                        race_prompt = gr.Textbox(label="Race prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                                 value=next(iter(EXAMPLE_PROMPTS.values()))[0], elem_id="race-prompt")
                        with gr.Row():
                            lane_a = gr.Dropdown(methods, value=default_method, label="Lane A", min_width=120)
                            lane_b = gr.Dropdown(methods, value=baseline_method(methods) or methods[0],
                                                 label="Lane B (baseline)", min_width=120)
                        lane_a_draft = gr.Dropdown([(label, key) for key, label in DRAFTERS.items()],
                                                   value=DEFAULT_DRAFTER, label="Lane A's drafter")
                        lane_a_gamma = gr.Slider(1, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, label="Lane A's γ (draft length)")
                        race_btn = gr.Button("▶ Race", variant="primary", elem_id="race-btn")
                        race_status = gr.HTML("", elem_id="race-status", padding=False)
                        gr.Markdown("Models, precision, seed, temperature, max new tokens and the chat template: "
                                    "the Explainer's settings. Lane B uses the Explainer's settings for its method.",
                                    elem_classes="note")
                        with gr.Accordion("Save or open a race", open=False):
                            race_download = gr.DownloadButton("Download this race (.json, both traces)",
                                                              interactive=False, elem_id="race-download")
                            race_upload = gr.UploadButton("Open a race file (.json)", file_types=[".json"],
                                                          elem_id="race-upload")
                    with gr.Column(scale=2, min_width=320, elem_classes="panels"):
                        race_player = player(empty_data(NO_RACE), elem_id="race-player", label="The race")
                        with gr.Accordion("The race's figures (both summary lines and the speedup)", open=False):
                            race_json = gr.JSON(label="Race figures", elem_id="race-figures")
                with gr.Accordion("Plain comparison table", open=False):
                    gr.Markdown(texts.SIDE)
                    gr.Markdown("Uses the prompt, models and settings of the Explainer tab.", elem_classes="note")
                    with gr.Row():
                        method_a = gr.Dropdown(methods, value=default_method, label="Method A")
                        method_b = gr.Dropdown(methods, value=baseline_method(methods) or methods[0],
                                               label="Method B (baseline)")
                    compare_btn = gr.Button("Run A, then B", variant="primary")
                    compare_status = gr.HTML("", elem_id="compare-status", padding=False)
                    cmp_table = gr.HTML(label="Measured comparison")
                    with gr.Row():
                        text_a = gr.Textbox(label="Text from method A", lines=6, interactive=False)
                        text_b = gr.Textbox(label="Text from method B", lines=6, interactive=False)

        # ---------------------------------------------------------------- wiring
        view_outputs = [stats, timeline, iter_caption, chips, text, draft_row, pq_plot, residual_plot, tree,
                        running, theory_plot, theory_md, cli, download, method_box, method_md, method_html,
                        method_plot, method_col2, method_plot2, playback]
        assert len(view_outputs) == len(VIEW_OUTPUTS)
        components = {"preset": preset, "custom_target": custom_target, "custom_draft": custom_draft,
                      "prompt": prompt, "chat": chat, "method": method, "method_a": method_a, "method_b": method_b,
                      "gamma": gamma, "temperature": temperature, "top_k": top_k, "top_p": top_p,
                      "lenience": lenience, "seed": seed, "max_new_tokens": max_new, "dtype": dtype, "pacing": pacing,
                      "position": position, "autorun": autorun, **knobs}
        controls = [components[name] for name in control_order()]

        def inputs(handler):  # the components of a handler's inputs, by its api names (controls.py)
            return [state] + [components[name] for name in handler.input_names]

        def on(trigger, fn, ins, outs, status, clear=True, **kwargs):
            """Wire `fn` through the error boundary (errors.py): its failures show in `status`, nothing
            else changes. `clear`: a success clears the status line (else leaves it)."""
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return trigger(guard(fn, len(outs), clear), ins, [*outs, status], **kwargs)

        cheap = dict(queue=False, show_progress="hidden", api_name=False)
        # the model slots: app/capacity.py says how many and why; app.py sets the threads and the batching
        model_events = dict(concurrency_limit=model_slots(), concurrency_id="model")
        # a run's progress (loading the models, decoding N of M tokens) shows in the status line only: a
        # progress overlay and timer on every panel cost the browser as much as a fifth of a decode on the
        # same machine (scripts/bench_pacing.py), and the panels themselves say what is decoded
        run_events = dict(model_events, show_progress_on=[run_status])
        run_ev = on(run_btn.click, generate, inputs(generate), [state, *view_outputs], run_status, api_name="generate",
                    **run_events)
        step_ev = on(step_btn.click, step, inputs(step), [state, *view_outputs], run_status, api_name="step",
                     **run_events)
        cmp_ev = on(compare_btn.click, compare, inputs(compare), [state, text_a, text_b, cmp_table], compare_status,
                    api_name="compare", **model_events)
        race_inputs = {**components, "prompt": race_prompt, "lane_a": lane_a, "lane_b": lane_b,
                       "lane_a_draft": lane_a_draft, "lane_a_gamma": lane_a_gamma}
        race_shown = [race_player, race_json, race_download]
        race_controls = [race_prompt, lane_a, lane_b, lane_a_draft, lane_a_gamma, gallery_note]  # a shipped race's
        race_ev = on(race_btn.click, race, [state] + [race_inputs[name] for name in race.input_names],
                     [state, *race_shown], race_status, api_name="race", **model_events)
        on(shipped_pick.input, open_shipped_race, shipped_pick, race_shown + race_controls, race_status,
           api_name=False)
        on(race_upload.upload, open_race_upload, race_upload, race_shown, race_status, api_name=False)
        # a live or opened race replaces the shipped one shown: its name leaves the dropdown
        for event in (race_btn.click, race_upload.upload):
            event(lambda: None, None, shipped_pick, api_name=False, queue=False)
        on(gallery_pick.input, on_gallery_pick, gallery_pick,
           [race_prompt, lane_a, lane_a_draft, lane_a_gamma, gallery_note], race_status, api_name=False)
        on(lane_a.change, on_lane_a, lane_a, [lane_a_draft, lane_a_gamma], race_status, clear=False, api_name=False)
        on(demo.load, race_on_load, None, [shipped_pick, *race_shown, *race_controls], race_status, clear=False,
           api_name=False)
        # Stop: the browser player pauses too (player.js), and the run in the queue is cancelled
        stop_btn.click(None, None, None, js=PAUSE_JS, **cheap)
        on(stop_btn.click, stop, [state, position], [state, *view_outputs], run_status,
           cancels=[run_ev, step_ev, cmp_ev, race_ev], **cheap)
        on(reset_btn.click, reset, [state, position], [state, *view_outputs], run_status, api_name=False)
        # cheap events run outside the queue: they never wait behind model runs nor count against them.
        # One timeline: the timeline moves the player (its JavaScript), the player moves the panels
        # (its "select" event, as it plays), and both render the panels outside the queue
        timeline.input(None, timeline, None, js=SEEK_JS, **cheap)
        on(timeline.input, show_iteration, [state, timeline, position], view_outputs, run_status, clear=False,
           trigger_mode="always_last", **cheap)
        # every report runs ("always_last" would rerun a pending report with the previous report's data):
        # the player sends the next one only once the panels have answered the last (player.js)
        on(playback.select, follow_player, [state, position], view_outputs, run_status, clear=False,
           trigger_mode="multiple", **cheap)
        on(position.change, show_position, [state, timeline, position], [pq_plot, method_plot2], run_status,
           clear=False, **cheap)
        opened = [state, *view_outputs, *controls, preset, pair_note]
        on(upload.upload, open_trace, [state, upload, position, preset, custom_draft], opened, run_status, **cheap)
        on(example_pick.input, open_example, [state, example_pick, position, preset, custom_draft], opened,
           run_status, **cheap)
        on(load_btn.click, load_models, [preset, custom_target, custom_draft, dtype], load_msg, run_status,
           api_name=False, **run_events)
        on(prompt_pick.input, on_prompt_pick, prompt_pick, [prompt, chat], run_status, clear=False, api_name=False)
        on(preset.change, on_preset, preset, [custom_target, custom_draft, preset_note], run_status, clear=False,
           api_name=False)
        on(preset.input, on_preset_input, [preset, method, custom_draft], [chat, pair_note], run_status, clear=False,
           **cheap)
        toggled = ("gamma", "lenience", *knobs)
        on(method.change, lambda m: on_method(m, toggled), method, [components[n] for n in toggled], run_status,
           clear=False, api_name=False)
        # a method the pair cannot run picks a pair that can, before Run (presets.fitting_preset)
        on(method.input, on_method_input, [method, preset, custom_draft], [preset, pair_note], run_status,
           clear=False, **cheap)
        lab_out = [lab_plot, lab_res, lab_tv, lab_md]
        on(lab_btn.click, lab_run, [table, lab_lenience, lab_n, lab_seed], lab_out, lab_status, api_name="lab",
           queue=False)
        on(converge_btn.click, lab_converge, [table, lab_lenience, lab_seed], lab_out, lab_status,
           api_name="lab_converge")
        on(normalize_btn.click, lab_normalize, table, table, lab_status, api_name=False, queue=False)
        on(demo.load, on_load, [state, position], [state, *view_outputs], run_status, clear=False, api_name=False,
           queue=False)
        on(demo.load, lab_run, [table, lab_lenience, lab_n, lab_seed], lab_out, lab_status, clear=False,
           api_name=False, queue=False)

        # ---------------------------------------------------------------- lesson wiring (lesson_tab.py)
        links = lesson_tab.ExplainerLinks(preset=preset, custom_draft=custom_draft, pair_note=pair_note,
                                          status=run_status, autorun=autorun, run_inputs=inputs(run_if_asked),
                                          race_outputs=[shipped_pick, *race_shown, *race_controls],
                                          race_status=race_status)
        lesson_tab.wire(demo, lesson, tabs, state, view_outputs, controls, links, on, run_events)
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=2)
    return demo


def launch_kwargs() -> dict:
    css = APP_CSS.read_text(encoding="utf-8") if APP_CSS.exists() else ""
    css += lesson_tab.lesson_css()
    js = APP_JS.read_text(encoding="utf-8") if APP_JS.exists() else None  # page-wide keyboard fixes
    return dict(css=css, js=js, theme=app_theme(), share=False, max_file_size="5mb", show_error=True,
                footer_links=["api", "gradio"], state_session_capacity=SESSION_CAPACITY)
