"""The Race tab's layout and the wiring of its events: the race (two lanes replayed in the browser
player) and, in an accordion, the plain comparison table. Both take the Explainer's settings (models,
precision, seed, sampling, max new tokens, chat template) beside the tab's own choices.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from decoding.methods.registry import METHODS, baseline_method

from .. import texts
from ..capacity import model_events
from ..errors import CHEAP, on
from ..i18n import t
from ..share import LINK_JS, SHARED_RACE_SETTINGS, race_figure, race_link_of
from ..gallery import DEFAULT_DRAFTER, DEFAULT_GAMMA, DRAFTERS, gallery_choices
from ..player import empty_data, player
from ..race_file import shipped_races
from ..settings import MAX_GAMMA, MAX_PROMPT_CHARS
from .compare import compare
from .handlers import (NO_RACE, on_gallery_pick, on_lane_a, open_race_upload, open_shipped_race, race, race_if_asked,
                       race_on_load)


@dataclass
class RaceTab:
    """What the other tabs reach: the outputs a shipped race fills (`outputs`: the shipped pick, then
    what `handlers.open_shipped_race` returns), the tab's status line and its model events (Stop cancels them)."""

    outputs: list
    status: gr.HTML
    model_events: list
    link_outputs: list = None  # what a race link sets: the Explainer's shared settings, the race's controls, autorun
    run_if_asked: tuple = ()  # (inputs, outputs, event settings) of the race a link asks for (handlers.race_if_asked)
    link_notice: gr.HTML = None  # what a race's link opened, or why it could not


def build(demo: gr.Blocks, explainer) -> RaceTab:
    """The tab's components and events (call inside `gr.Tab("Race")`). `explainer`: the Explainer's
    `ExplainerTab`, whose settings both lanes and both compared methods use."""
    methods = list(METHODS)
    lane_default = explainer.components["method"].value
    baseline = baseline_method(methods) or methods[0]
    gr.Markdown(texts.RACE)
    with gr.Row(equal_height=False, elem_classes="mainrow"):
        with gr.Column(scale=1, min_width=280, elem_classes="controls"):
            races = list(shipped_races())
            shipped_pick = gr.Dropdown(races, value=None, elem_id="shipped-races",
                                       label="Shipped races (replay at once, no model needed)",
                                       info=None if races else "No race ships with this copy of the app.")
            gallery_pick = gr.Dropdown(gallery_choices(), value=None, label="Task gallery", elem_id="gallery-pick")
            gallery_note = gr.Markdown("", elem_classes="note")
            race_prompt = gr.Textbox(label="Race prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                     value=explainer.components["prompt"].value, elem_id="race-prompt")
            with gr.Row():
                lane_a = gr.Dropdown(methods, value=lane_default, label="Lane A", min_width=120)
                lane_b = gr.Dropdown(methods, value=baseline, label="Lane B (baseline)", min_width=120)
            lane_a_draft = gr.Dropdown([(label, key) for key, label in DRAFTERS.items()],
                                       value=DEFAULT_DRAFTER, label="Lane A's drafter")
            lane_a_gamma = gr.Slider(1, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, label="Lane A's γ (draft length)")
            race_btn = gr.Button("▶ Race", variant="primary", elem_id="race-btn")
            race_status = gr.HTML("", elem_id="race-status", padding=False)
            # what a link opened, or why it could not be opened (app/share.py)
            link_notice = gr.HTML("", elem_id="race-link-notice", padding=False)
            gr.Markdown("Models, precision, seed, temperature, max new tokens and the chat template: "
                        "the Explainer's settings. Lane B uses the Explainer's settings for its method.",
                        elem_classes="note")
            with gr.Accordion("Save or open a race", open=False):
                race_download = gr.DownloadButton("Download this race (.json, both traces)",
                                                  interactive=False, elem_id="race-download")
                race_upload = gr.UploadButton("Open a race file (.json)", file_types=[".json"],
                                              elem_id="race-upload")
            with gr.Accordion(t("export.menu.title"), open=False, elem_id="race-share"):
                fig_fmt = gr.Radio([("SVG", "svg"), ("PNG", "png")], value="svg", label=t("export.menu.format"),
                                   elem_id="race-export-format")
                fig_btn = gr.Button(t("export.menu.button"), size="sm", elem_id="race-export-btn")
                fig_note = gr.Markdown(t("export.menu.note"), elem_classes="note")
                fig_file = gr.File(label=t("export.menu.file"), visible=False, interactive=False,
                                   elem_id="race-export-file")
                link_btn = gr.Button(t("export.link.race_button"), size="sm", elem_id="race-link-btn")
                link_query = gr.Textbox(visible=False, elem_id="race-link-query")
                link_box = gr.Textbox(label=t("export.link.label"), interactive=False, buttons=["copy"],
                                      elem_id="race-link")
        with gr.Column(scale=2, min_width=320, elem_classes="panels"):
            race_player = player(empty_data(NO_RACE), elem_id="race-player", label="The race")
            with gr.Accordion("The race's figures (both summary lines and the speedup)", open=False):
                race_json = gr.JSON(label="Race figures", elem_id="race-figures")
    with gr.Accordion("Plain comparison table", open=False):
        gr.Markdown(texts.SIDE)
        gr.Markdown("Uses the prompt, models and settings of the Explainer tab.", elem_classes="note")
        with gr.Row():
            method_a = gr.Dropdown(methods, value=lane_default, label="Method A")
            method_b = gr.Dropdown(methods, value=baseline, label="Method B (baseline)")
        compare_btn = gr.Button("Run A, then B", variant="primary")
        compare_status = gr.HTML("", elem_id="compare-status", padding=False)
        cmp_table = gr.HTML(label="Measured comparison")
        with gr.Row():
            text_a = gr.Textbox(label="Text from method A", lines=6, interactive=False)
            text_b = gr.Textbox(label="Text from method B", lines=6, interactive=False)

    state, settings = explainer.state, explainer.components
    slots = model_events()
    compared = {**settings, "method_a": method_a, "method_b": method_b}
    cmp_ev = on(compare_btn.click, compare, [state] + [compared[name] for name in compare.input_names],
                [state, text_a, text_b, cmp_table], compare_status, api_name="compare", **slots)
    race_inputs = {**settings, "prompt": race_prompt, "lane_a": lane_a, "lane_b": lane_b,
                   "lane_a_draft": lane_a_draft, "lane_a_gamma": lane_a_gamma}
    race_shown = [race_player, race_json, race_download]
    race_controls = [race_prompt, lane_a, lane_b, lane_a_draft, lane_a_gamma, gallery_note]  # a shipped race's
    race_ev = on(race_btn.click, race, [state] + [race_inputs[name] for name in race.input_names],
                 [state, *race_shown], race_status, api_name="race", **slots)
    on(shipped_pick.input, open_shipped_race, shipped_pick, race_shown + race_controls, race_status, api_name=False)
    on(race_upload.upload, open_race_upload, race_upload, race_shown, race_status, api_name=False)
    # a live or opened race replaces the shipped one shown: its name leaves the dropdown
    for event in (race_btn.click, race_upload.upload):
        event(lambda: None, None, shipped_pick, api_name=False, queue=False)
    on(gallery_pick.input, on_gallery_pick, gallery_pick,
       [race_prompt, lane_a, lane_a_draft, lane_a_gamma, gallery_note], race_status, api_name=False)
    on(lane_a.change, on_lane_a, lane_a, [lane_a_draft, lane_a_gamma], race_status, clear=False, api_name=False)
    outputs = [shipped_pick, *race_shown, *race_controls]
    on(demo.load, race_on_load, None, outputs, race_status, clear=False, api_name=False)
    on(fig_btn.click, race_figure, [race_player, race_json, fig_fmt], [fig_file, fig_note], race_status, clear=False,
       **CHEAP)
    shared = [settings[name] for name in SHARED_RACE_SETTINGS]
    made = on(link_btn.click, race_link_of, [race_player, race_json, shipped_pick, race_prompt, lane_a, lane_b,
                                             lane_a_draft, lane_a_gamma, *shared], link_query, race_status, **CHEAP)
    made.then(None, link_query, link_box, js=LINK_JS, **CHEAP)
    autorun = gr.State(False)  # a race's link asked for a race (app/share.py)
    asked = [state] + [{**race_inputs, "autorun": autorun}[name] for name in race_if_asked.input_names]
    return RaceTab(outputs, race_status, [cmp_ev, race_ev], [*shared, race_prompt, lane_a, lane_b, lane_a_draft,
                                                                lane_a_gamma, autorun],
                   (asked, [state, *race_shown, autorun], slots), link_notice)
