"""The Race tab's layout and the wiring of its events: the race (two lanes replayed in the browser
player) and, in an accordion, the plain comparison table. Both take the Explainer's settings (models,
precision, seed, sampling, max new tokens, chat template) beside the tab's own choices.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from decoding.methods.registry import METHODS, baseline_method

from ..capacity import model_events
from ..errors import on
from ..gallery import DEFAULT_DRAFTER, DEFAULT_GAMMA, drafter_choices, gallery_choices
from ..i18n import t
from ..i18n.ui import chrome, on_change
from ..player import empty_data, player
from ..race_file import shipped_races
from ..race_result import method_title
from ..settings import MAX_GAMMA, MAX_PROMPT_CHARS
from .compare import compare
from .handlers import (no_race, on_gallery_pick, on_lane_a, open_race_upload, open_shipped_race, race, race_in_language,
                       race_on_load)


@dataclass
class RaceTab:
    """What the other tabs reach: the outputs a shipped race fills (`outputs`: the shipped pick, then
    what `handlers.open_shipped_race` returns), the tab's status line and its model events (Stop cancels them)."""

    outputs: list
    status: gr.HTML
    model_events: list


def build(demo: gr.Blocks, explainer) -> RaceTab:
    """The tab's components and events (call inside the Race's gr.Tab). `explainer`: the Explainer's
    `ExplainerTab`, whose settings both lanes and both compared methods use."""
    methods = list(METHODS)
    lane_default = explainer.components["method"].value
    baseline = baseline_method(methods) or methods[0]
    method_choices = lambda lang=None: [(method_title(m), m) for m in methods]  # noqa: E731
    chrome(gr.Markdown(t("race.intro")), value="race.intro")
    with gr.Row(equal_height=False, elem_classes="mainrow"):
        with gr.Column(scale=1, min_width=280, elem_classes="controls"):
            races = list(shipped_races())
            shipped_pick = chrome(gr.Dropdown(races, value=None, elem_id="shipped-races", label=t("race.shipped"),
                                              info=None if races else t("race.shipped.none")),
                                  label="race.shipped", **({} if races else {"info": "race.shipped.none"}))
            gallery_pick = chrome(gr.Dropdown(gallery_choices(), value=None, label=t("race.gallery"),
                                              elem_id="gallery-pick"),
                                  label="race.gallery", choices=lambda lang: gallery_choices())
            gallery_note = gr.Markdown("", elem_classes="note")
            race_prompt = chrome(gr.Textbox(label=t("race.prompt"), lines=3, max_length=MAX_PROMPT_CHARS,
                                            value=explainer.components["prompt"].value, elem_id="race-prompt"),
                                 label="race.prompt")
            with gr.Row():
                lane_a = chrome(gr.Dropdown(method_choices(), value=lane_default, label=t("race.lane_a"),
                                            min_width=120), label="race.lane_a", choices=method_choices)
                lane_b = chrome(gr.Dropdown(method_choices(), value=baseline, label=t("race.lane_b"), min_width=120),
                                label="race.lane_b", choices=method_choices)
            lane_a_draft = chrome(gr.Dropdown(drafter_choices(), value=DEFAULT_DRAFTER, label=t("race.lane_a_draft")),
                                  label="race.lane_a_draft", choices=lambda lang: drafter_choices())
            lane_a_gamma = chrome(gr.Slider(1, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, label=t("race.lane_a_gamma")),
                                  label="race.lane_a_gamma")
            race_btn = chrome(gr.Button(t("race.run"), variant="primary", elem_id="race-btn"), value="race.run")
            race_status = gr.HTML("", elem_id="race-status", padding=False)
            chrome(gr.Markdown(t("race.settings_note"), elem_classes="note"), value="race.settings_note")
            with gr.Accordion(t("race.save_open"), open=False) as box:
                chrome(box, label="race.save_open")
                race_download = chrome(gr.DownloadButton(t("race.download"), interactive=False,
                                                         elem_id="race-download"), label="race.download")
                race_upload = chrome(gr.UploadButton(t("race.upload"), file_types=[".json"], elem_id="race-upload"),
                                     label="race.upload")
        with gr.Column(scale=2, min_width=320, elem_classes="panels"):
            race_player = player(empty_data(no_race()), elem_id="race-player", label=t("race.player"))
            chrome(race_player, label="race.player")
            with gr.Accordion(t("race.figures_box"), open=False) as box:
                chrome(box, label="race.figures_box")
                race_json = chrome(gr.JSON(label=t("race.figures"), elem_id="race-figures"), label="race.figures")
    with gr.Accordion(t("race.compare_box"), open=False) as box:
        chrome(box, label="race.compare_box")
        chrome(gr.Markdown(t("race.side_intro")), value="race.side_intro")
        chrome(gr.Markdown(t("race.compare_note"), elem_classes="note"), value="race.compare_note")
        with gr.Row():
            method_a = chrome(gr.Dropdown(method_choices(), value=lane_default, label=t("race.method_a")),
                              label="race.method_a", choices=method_choices)
            method_b = chrome(gr.Dropdown(method_choices(), value=baseline, label=t("race.method_b")),
                              label="race.method_b", choices=method_choices)
        compare_btn = chrome(gr.Button(t("race.compare_run"), variant="primary"), value="race.compare_run")
        compare_status = gr.HTML("", elem_id="compare-status", padding=False)
        cmp_table = chrome(gr.HTML(label=t("race.compare_table")), label="race.compare_table")
        with gr.Row():
            text_a = chrome(gr.Textbox(label=t("race.text_a"), lines=6, interactive=False), label="race.text_a")
            text_b = chrome(gr.Textbox(label=t("race.text_b"), lines=6, interactive=False), label="race.text_b")

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
    # a new language: the race shown in the new words (its tokens and times unchanged)
    on_change(race_in_language, [race_player, race_json, shipped_pick], [race_player, race_json, gallery_note],
              race_status)
    return RaceTab(outputs, race_status, [cmp_ev, race_ev])
