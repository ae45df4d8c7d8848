"""The race tab's handlers: run a race on the loaded models, open a shipped or uploaded race file,
pick a gallery prompt. Each race outputs the player's data (`player.py`), the race's figures as
plain data (`race_result.race_figures`) and the race file to download (`race_file.py`).

The lanes share the Explainer's settings (models, precision, seed, sampling, max new tokens, chat
template) and the race tab's prompt; lane A's method, drafter and gamma and lane B's method are the
race tab's own. Recording (warm-up, then one lane after the other) is `race_run.record_race`.
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
from pathlib import Path

import gradio as gr

from decoding.methods.registry import METHODS, method_view
from decoding.run.pair import HYBRID, HYBRID_CORPUS, PROMPT_LOOKUP

from ..controls import with_run_inputs
from ..gallery import DRAFTERS, gallery_item, lane_a_choice, tag_text
from ..i18n import t
from ..live import check_prompt_fits, load_models, settings_from_values
from ..player import empty_data, lane_data, player_data, relabel
from ..race_file import Race, read_race, shipped_races, write_race
from ..race_result import lane_name, race_figures, result_sentence
from ..race_run import LaneRun, record_race
from ..session import Session
from ..settings import MAX_GAMMA, Settings
from ..zerogpu import on_zerogpu, whole_race



def no_race() -> str:
    """What the empty player says, in the current language."""
    return t("race.none")


_SHIPPED_COPIES: str | None = None  # a temporary folder serving shipped races for download


def drafter_spec(choice: str, pair_draft: str) -> str:
    """The draft spec of lane A's drafter choice (a key of gallery.DRAFTERS) on a pair whose own
    draft is `pair_draft`; ValueError for a choice this pair cannot make."""
    if choice == "pair":
        return pair_draft
    if choice == PROMPT_LOOKUP:
        return PROMPT_LOOKUP
    if choice == "hybrid":
        if pair_draft.partition(":")[0].partition("=")[0] in (HYBRID, HYBRID_CORPUS):
            return pair_draft
        if pair_draft == PROMPT_LOOKUP:
            raise ValueError(t("race.error.hybrid_lookup"))
        return f"{HYBRID}:{pair_draft}"
    raise ValueError(t("race.error.unknown_drafter", choice=repr(choice), names=", ".join(DRAFTERS)))


def lane_settings(values: dict) -> tuple[Settings, Settings]:
    """Lane A's and lane B's checked settings: the same in everything but the method and that
    method's own settings (lane A's drafter and gamma)."""
    a = settings_from_values({**values, "gamma": values.get("lane_a_gamma", values.get("gamma"))}, values["lane_a"])
    if METHODS[a.method].uses_drafter:
        try:
            a = dataclasses.replace(a, draft=drafter_spec(values.get("lane_a_draft") or "pair", a.draft))
        except ValueError as exc:
            raise gr.Error(str(exc), title=t("race.error.drafter_title")) from None
    b = settings_from_values(values, values["lane_b"])
    return a, b


def race_view(race: Race) -> tuple[dict, dict]:
    """(the player's data, the race's figures) of a race."""
    figures = race_figures(race)
    lanes = [lane_data(lane.label, lane.records, lane.summary, name=lane_name(lane.summary)) for lane in race.lanes]
    title = race.title or t("race.against", a=lanes[0]["name"], b=lanes[1]["name"])
    value = player_data(lanes, title=title, prompt=race.lanes[0].summary.prompt, result=figures["result"],
                        verdict=figures["verdict"])
    return value, figures


@with_run_inputs(method_inputs=("lane_a", "lane_b"), extra=("lane_a_draft", "lane_a_gamma"))
def race(session, values: dict, progress):
    """Warm up both lanes, run A then B with lean traces, and send both traces to the player once."""
    session = session if isinstance(session, Session) else Session()
    settings = lane_settings(values)
    runs = []
    for label, s in zip("AB", settings):
        target, draft = load_models(s.target, s.draft, METHODS[s.method].uses_drafter, progress, s.dtype)
        try:
            check_prompt_fits(len(target.encode_prompt(s.prompt, s.chat)), s.max_new_tokens, target.max_context)
        except ValueError as exc:
            raise gr.Error(str(exc), title=t("race.error.prompt_title")) from None
        runs.append(LaneRun(label, s, target, draft))

    def report(fraction, message):
        if progress is not None:
            progress(fraction, desc=message)

    try:
        if on_zerogpu():  # both lanes in one GPU call; the player replays the records it returns
            result = whole_race(*settings, {"machine": _machine()})
        else:
            result = record_race(runs, report, recorded={"machine": _machine()})
    except ValueError as exc:
        raise gr.Error(t("race.error.stopped", reason=exc), title=t("race.error.stopped_title")) from None
    for lane in result.lanes:
        if method_view(lane.summary.method).baseline:  # the theory panel's baseline, as the Explainer keeps it
            session.baselines[runs[0].settings.target] = lane.summary.tokens_per_second
    value, figures = race_view(result)
    return session, value, figures, gr.update(value=_race_download(session, result), interactive=True)


def _machine() -> dict:
    from decoding.eval.bench.driver import machine_info

    info = machine_info()
    return {k: info.get(k) for k in ("cpu", "cores", "usable_cores", "torch_threads", "cuda")}


def _race_download(session: Session, result: Race) -> str:
    if session.tmpdir is None:
        session.tmpdir = tempfile.mkdtemp(prefix="specdec-")
    a, b = (lane.summary for lane in result.lanes)
    seed = (a.settings or {}).get("seed", 0)
    path = Path(session.tmpdir) / f"specdec-race-{a.method}-vs-{b.method}-seed{seed}.json"
    write_race(path, result)
    return str(path)


def _shipped_copy(path: Path) -> str:
    """A copy of a shipped race in a temporary folder, which Gradio serves wherever the app runs from."""
    global _SHIPPED_COPIES
    if _SHIPPED_COPIES is None or not Path(_SHIPPED_COPIES).is_dir():
        _SHIPPED_COPIES = tempfile.mkdtemp(prefix="specdec-races-")
        atexit.register(shutil.rmtree, _SHIPPED_COPIES, True)
    copy = Path(_SHIPPED_COPIES) / path.name
    shutil.copyfile(path, copy)
    return str(copy)


def _open(path, download: str) -> tuple:
    try:
        result = read_race(path)
    except (OSError, ValueError) as exc:
        raise gr.Error(t("race.error.open", reason=exc), title=t("race.error.not_race_title")) from None
    value, figures = race_view(result)
    return value, figures, gr.update(value=download, interactive=True)


def lane_a_drafter(draft: str, pair_draft: str) -> str:
    """The lane A drafter choice (a key of gallery.DRAFTERS) that gives `draft` on a pair whose own
    draft is `pair_draft`."""
    draft = str(draft or "")
    if draft == pair_draft:
        return "pair"
    if draft == PROMPT_LOOKUP:
        return PROMPT_LOOKUP
    if draft.partition(":")[0].partition("=")[0] in (HYBRID, HYBRID_CORPUS):
        return "hybrid"
    return "pair"


def race_settings_note(race: Race) -> str:
    """What a shown race was recorded with, in words, and what pressing Race would use instead."""
    a = race.lanes[0].settings or {}
    summary = race.lanes[0].summary
    temperature = a.get("temperature")
    sampling = (t("race.note.greedy") if temperature == 0 else
                t("race.note.temperature", t=f"{temperature:g}") if isinstance(temperature, (int, float)) else "")
    tokens = t("race.note.max_tokens", n=a["max_new_tokens"]) if a.get("max_new_tokens") else ""
    dtype = (summary.models or {}).get("dtype") or ""
    machine = race.recorded.get("machine")
    cpu = machine.get("cpu") if isinstance(machine, dict) else machine
    date = str(race.recorded.get("date") or "")[:10]
    where = (t("race.note.recorded_on", machine=cpu) if cpu else t("race.note.recorded")) + (f" ({date})" if date
                                                                                               else "")
    parts = t("race.note.sep").join(x for x in (sampling, tokens, dtype) if x)
    return (t("race.note.head", where=where, parts=parts) if parts else t("race.note.head_only", where=where)) \
        + t("race.note.tail")


def race_controls(race: Race) -> tuple:
    """The race tab's controls for a shown race: prompt, lane A, lane B, lane A's drafter and γ, the note."""
    from ..presets import presets

    a, b = race.lanes
    settings = a.settings or {}
    spec = METHODS.get(a.summary.method)
    pair_draft = presets()[0].draft
    drafter = lane_a_drafter(settings.get("draft") or (a.summary.models or {}).get("draft"), pair_draft)
    gamma = settings.get("gamma") or (a.summary.settings or {}).get("gamma")
    return (a.summary.prompt,
            a.summary.method if a.summary.method in METHODS else gr.skip(),
            b.summary.method if b.summary.method in METHODS else gr.skip(),
            gr.update(value=drafter, visible=bool(spec and spec.uses_drafter)),
            gr.update(value=min(max(int(gamma), 1), MAX_GAMMA), visible=bool(spec and spec.uses_gamma))
            if isinstance(gamma, int) else gr.skip(),
            race_settings_note(race))


SHIPPED_RACE_OUTPUTS = 3 + 6  # what open_shipped_race returns: the race shown (3), then its controls (6)


def open_shipped_race(title):
    """Open a shipped race by its title and play it (no model needed); the race tab's controls take
    its prompt, lanes, drafter and γ, so that what is shown and what Race would run agree."""
    races = shipped_races()
    if title not in races:
        return (empty_data(t("race.none_shipped")), None, gr.update(value=None, interactive=False),
                *(gr.skip(),) * 6)
    shown = _open(races[title], _shipped_copy(races[title]))
    return (*shown, *race_controls(read_race(races[title])))


def open_race_upload(file):
    """Open an uploaded race file (both traces in one JSON file) and play it."""
    if not file:
        raise gr.Error(t("race.error.no_file"), title=t("race.error.not_race_title"))
    path = file if isinstance(file, str) else getattr(file, "name", None)
    return _open(path, path)


def race_on_load():
    """On page load: the first shipped race, ready to play once the race tab is opened, with the
    race tab's controls set to that race (`open_shipped_race`)."""
    races = shipped_races()
    if not races:
        return gr.skip(), empty_data(no_race()), None, gr.skip(), *(gr.skip(),) * 6
    title = next(iter(races))
    return (title, *open_shipped_race(title))


def on_lane_a(method):
    """Lane A's drafter and gamma show only for a method that uses them."""
    spec = METHODS.get(method)
    return (gr.update(visible=bool(spec and spec.uses_drafter)), gr.update(visible=bool(spec and spec.uses_gamma)))


def on_gallery_pick(item_id):
    """A gallery prompt moves into the race; lane A takes the drafter and gamma measured for it."""
    item = gallery_item(item_id) if item_id else None
    if item is None:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), ""
    choice, gamma, tag = lane_a_choice(item.id)
    return item.prompt, "speculative", choice, min(max(int(gamma), 1), MAX_GAMMA), tag_text(tag)


def race_in_language(value, figures, shipped):
    """The race shown, in the current language: the player's words and result sentence, the figures'
    result, and the settings note of a shipped race (the race itself, its tokens and times unchanged)."""
    shown = relabel(value)
    if shown is None:
        return gr.skip(), gr.skip(), gr.skip()
    if not shown.get("lanes"):
        shown["message"] = no_race()
        return shown, gr.skip(), gr.skip()
    note = gr.skip()
    if isinstance(figures, dict) and len(figures.get("lanes") or []) == 2:
        from decoding.trace.record import RunSummary

        a, b = (RunSummary.from_dict(lane["summary"]) for lane in figures["lanes"])
        shown["result"] = result_sentence(a, b, lane_name(a), lane_name(b))
        figures = {**figures, "result": shown["result"],
                   "lanes": [{**lane, "name": lane_name(s)} for lane, s in zip(figures["lanes"], (a, b))]}
        for lane, s in zip(shown.get("lanes") or [], (a, b)):
            lane["name"] = lane_name(s)
        if not figures.get("title"):
            shown["title"] = t("race.against", a=lane_name(a), b=lane_name(b))
    races = shipped_races()
    if shipped in races:
        note = race_settings_note(read_race(races[shipped]))
    return shown, figures if isinstance(figures, dict) else gr.skip(), note
