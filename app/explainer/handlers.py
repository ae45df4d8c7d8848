"""The explainer's event handlers: Run, Step, Stop, Reset, the timeline, the player, opening traces,
loading models and the controls' small reactions. Each returns the session and the `view.view`
outputs, and the run handlers a status line (`errors.guard` wires them: an exception becomes that
line and changes nothing else).

Run and Step take the run inputs that `controls.run_input_names` lists (derived from the method
registry), so a new method setting reaches them without touching this file.
"""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from decoding.lm.batching import sharing

from .. import charts
from decoding.methods.registry import METHODS

from ..controls import controls_from_settings, visible_for, with_run_inputs
from ..errors import Status, status_html
from ..i18n_errors import app_error
from ..render import tr
from ..live import advance, load_models as load_pair_models, settings_from_values, start
from ..packed import pack
from .playback import idle_playback, playback_data
from ..presets import fitting_preset, pair_problem, preset_by_label, preset_for_models, preset_note, resolve_pair
from ..session import Session, example_traces, find_trace, read_trace
from ..settings import settings_from_summary
from .view import VIEW_OUTPUTS, view, view_of
from ..iterations import iteration_index, position_index, rest_index, timeline_index
from ..zerogpu import on_zerogpu


# label -> (prompt, chat): prompts of different kinds (prompt lookup shines on copying)
EXAMPLE_PROMPTS = {
    "Copy a list (drafts get accepted)": (
        "Repeat this list exactly, then continue it: apple, banana, cherry, apple, banana, cherry, apple, banana,", True),
    "Question (chat)": ("Explain in two sentences why the sky is blue.", True),
    "Code (chat)": ("Write a Python function that returns the squares of a list of numbers.", True),
    "Story opening (plain text)": ("Once upon a time, in a quiet village by the sea,", False),
    "Fact completion (plain text)": ("The capital of France is", False),
}


def _session(session) -> Session:
    return session if isinstance(session, Session) else Session()


MAX_PACING = 5.0
LIGHT_SECONDS = 0.5  # while a run decodes at pacing 0 the light panels refresh at most twice a second


def pacing_seconds(value) -> float:
    """The pacing control's seconds per iteration, clamped to [0, MAX_PACING] (0 for a bad value)."""
    try:
        pacing = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, min(pacing, MAX_PACING)) if pacing == pacing else 0.0


def shared_note(before: tuple[int, int]) -> str:
    """What a run's speed means when the server batched it with other runs (decoding/lm/batching.py),
    from the batcher's (passes, calls) at the run's start; "" when it ran (almost) alone."""
    passes, calls = (now - then for now, then in zip(sharing(), before))
    if passes <= 0 or calls / passes < 1.05:
        return ""
    return tr("status.shared", runs=f"{calls / passes:.1f}")


def _cleared(session: Session, note: str, player_message: str) -> tuple:
    """The view of a run that has just started: no stale panels, the player waiting."""
    shown = Session(settings=session.settings)
    return view(shown, None, None, note=note, playback=idle_playback(session, player_message))


def _status(message: str, kind: str = "info") -> Status:
    return status_html(message, kind)


def _finished_status(session: Session, paced: bool) -> Status:
    s = session.summary
    if s is None:
        return _status(tr("status.stopped_continue"))
    done = tr("status.done", tokens=len(s.token_ids), seconds=f"{s.wall_seconds:.2f}", tps=f"{s.tokens_per_second:.1f}")
    if paced:
        return _status(done + " " + tr("status.done_paced"), "ok")
    return _status(done + " " + tr("status.done_timeline"), "ok")


@with_run_inputs(extra=("pacing", "position"))
def generate(session, values: dict, progress):
    """Run (or continue a stepped run with the same settings) to the end.

    A new run replaces the old one everywhere as soon as its first iteration is decoded (before,
    a failure leaves the old run as it was: `live.start`). A pacing above 0 never sleeps on the
    server: the run decodes at full speed inside its model slot (reporting progress only), and its
    records go to the browser player, which plays them at that pace while the panels follow it.
    At pacing 0 the light panels (figures, chips, text, draft row) refresh at most every
    LIGHT_SECONDS while it decodes, and the heavy ones (charts, tree, method panel) once at the end,
    so that rendering does not slow the decode it measures."""
    session = _session(session)
    settings = settings_from_values(values)
    position = values["position"]
    pacing = pacing_seconds(values["pacing"])
    session.stop_requested = False
    before = sharing()
    fresh = not (session.live and session.settings is not None and session.settings.key() == settings.key())
    if fresh:
        start(session, settings, progress)
    token = session.run_token  # another event replacing the run (Reset, a new run, a lesson chapter) ends this one
    if fresh:
        waiting = tr("status.waiting_paced" if pacing > 0 else "status.waiting")
        yield (session, *_cleared(session, tr("status.decoding"), waiting), _status(tr("status.decoding")))
    last_yield = time.monotonic()
    tokens = sum(len(r.emitted) for r in session.records)
    while session.generator is not None and not session.stop_requested:
        if session.run_token != token:
            return
        record = advance(session)
        if record is None:
            break
        tokens += len(record.emitted)
        if session.generator is None:
            break
        if pacing > 0:
            if progress is not None:
                progress((min(tokens, settings.max_new_tokens), settings.max_new_tokens), desc=tr("status.progress"),
                         unit="tokens")
        elif time.monotonic() - last_yield >= LIGHT_SECONDS:
            yield (session, *view(session, None, position, light=True, note=tr("status.decoding")), gr.skip())
            last_yield = time.monotonic()
    if session.run_token != token:
        return
    shared = shared_note(before)
    if session.stop_requested and session.live:
        note = tr("status.stopped_continue")
        yield (session, *view(session, None, position, final=True, playback=playback_data(session), note=note),
               _status(note))
        return
    if pacing > 0 and session.records:  # the panels start where the player starts, and follow it
        yield (session, *view(session, 0, position, final=True, playback=playback_data(session, pacing, shared),
                              note=shared), _finished_status(session, True))
        return
    yield (session, *view(session, None, position, final=True, playback=playback_data(session, shared=shared),
                          note=shared), _finished_status(session, False))


@with_run_inputs(extra=("pacing", "position", "autorun"))
def run_if_asked(session, values: dict, progress):
    """What follows a lesson chapter's "Run it live": the run `generate` makes, when the chapter
    asked for one (`values["autorun"]`, which this clears), else nothing."""
    if not values["autorun"]:
        yield (gr.skip(),) * (len(VIEW_OUTPUTS) + 3)
        return
    for out in generate.__wrapped__(session, values, progress):
        *shown, status = out
        yield (*shown, False, status)


@with_run_inputs(extra=("position",))
def step(session, values: dict, progress):
    """Advance exactly one iteration (starting a run first when none is live with these settings)."""
    session = _session(session)
    settings = settings_from_values(values)
    session.stop_requested = False
    note = ""
    if not (session.live and session.settings is not None and session.settings.key() == settings.key()):
        if session.live:
            note = tr("status.settings_changed")
        record = start(session, settings, progress)
    else:
        record = advance(session)
    if on_zerogpu():
        note = (note + " " if note else "") + tr("status.zerogpu_step")
    if record is None and not session.records:
        note = tr("status.no_iteration")
    shown = len(session.records) - 1
    done = session.generator is None
    status = tr("status.step_done" if done else "status.step_more", i=shown + 1)
    return (session, *view(session, shown, values["position"], final=done, note=note,
                           playback=playback_data(session, current=shown)), _status(status))


def stop(session, position):
    """Cancel a streaming run (the player pauses too, in the browser); the iterations so far stay on
    the timeline and Step continues."""
    session = _session(session)
    session.stop_requested = True
    if not session.records:
        return (session, *view(session, None, position, note=tr("status.stopped")), _status(tr("status.stopped")))
    if session.live:
        note = tr("status.stopped_continue")
        return (session, *view(session, None, position, final=True, note=note, playback=playback_data(session)),
                _status(note))
    return (session, *view_of(), _status(tr("status.already_finished")))


def reset(session, position):
    session = _session(session)
    session.reset_run()
    session.settings = None
    session.source = "none"
    note = tr("status.cleared")
    return (session, *view(session, None, position, note=note, playback=idle_playback(session)), _status(note))


def show_iteration(session, upto, position):
    """The timeline moved (it counts iterations from 1): every panel shows that iteration; the player
    follows in the browser (the timeline's own JavaScript tells it)."""
    session = _session(session)
    return view(session, timeline_index(upto), position)


def follow_player(session, position, evt: gr.EventData):
    """The browser player reached an iteration (its event data: iteration, from 0, and the nonce of
    the value it plays): the panels show that iteration and the player's `shown` prop confirms it
    (player.js holds the next iteration until then), unless the player plays an older run."""
    session = _session(session)
    data = getattr(evt, "_data", None) or {}
    if not session.records or data.get("nonce") != session.playback_id:
        return view_of()
    try:
        i = int(data.get("iteration"))
    except (TypeError, ValueError):
        return view_of()
    # every panel at iteration i, and the player told so (it waits for this before going on)
    return view(session, i, position)._replace(playback=gr.update(shown={"nonce": data["nonce"], "iteration": i}))


def show_position(session, upto, position):
    from .panels import position_figure

    session = _session(session)
    if not session.records:
        return charts.empty_figure(tr("view.no_run")), gr.skip()
    record = session.records[iteration_index(session.records, timeline_index(upto))]
    return charts.pq_figure(record, position_index(position)), position_figure(record, position_index(position))


def open_trace_file(session: Session, path, title: str, source: str, position):
    """(session, *view) with the trace at `path` opened: read first, so a bad file changes nothing."""
    try:
        records, summary = read_trace(path)
    except (OSError, ValueError) as exc:
        raise app_error("trace.cannot_open", "title.not_trace", name=title, detail=exc) from None
    session.reset_run()
    session.records, session.summary = pack(records), summary  # kept compactly (packed.py)
    session.settings = settings_from_summary(summary)
    session.source, session.title = source, title
    session.target = session.draft = None
    models = summary.models if summary is not None else {}
    session.target_bytes = models.get("target_weight_bytes")
    session.draft_bytes = models.get("draft_weight_bytes")
    return (session, *view(session, None, position, final=True, playback=playback_data(session)))


def trace_controls(session, preset_label, custom_draft) -> tuple:
    """After a run is opened: the controls take its settings (`controls_from_session`) and the model
    pair the one it ran on (or, failing that, one that can run its method), with a note saying so:
    (*controls, preset, pair note)."""
    controls = controls_from_session(session)
    settings = session.settings if isinstance(session, Session) else None
    if settings is None:
        return (*controls, gr.skip(), gr.skip())
    label, note = preset_label, ""
    models = session.summary.models if session.summary is not None else {}
    if METHODS.get(settings.method) is not None and METHODS[settings.method].uses_drafter:
        used = preset_for_models(models.get("target"), models.get("draft"))
        if used is not None and used.label != preset_label:
            label, note = used.label, tr("status.pair_switched", pair=used.label)
    near, why = fitting_preset(settings.method, label, custom_draft or "")
    if near is not None:
        label, note = near.label, why
    elif why:
        note = why
    return (*controls, gr.update(value=label) if label != preset_label else gr.skip(), note)


def open_trace(session, file, position, preset_label, custom_draft):
    """An uploaded trace: opened, with the controls and the pair moved to its run."""
    session = _session(session)
    if not file:
        raise app_error("trace.no_file", "title.not_trace")
    path = file if isinstance(file, str) else getattr(file, "name", None)
    out = open_trace_file(session, path, Path(path).name, "trace", position)
    return (*out, *trace_controls(session, preset_label, custom_draft),
            _status(tr("status.opened_file", name=Path(path).name)))


def open_example(session, title, position, preset_label=None, custom_draft=""):
    """A shipped example trace: opened, with the controls and the pair moved to its run."""
    session = _session(session)
    examples = example_traces()
    if title not in examples:
        raise app_error("trace.no_example", "title.not_trace")
    out = open_trace_file(session, examples[title], title, "example", position)
    if preset_label is None:
        return out
    return (*out, *trace_controls(session, preset_label, custom_draft),
            _status(tr("status.opened_example", title=title)))


def controls_from_session(session):
    """After a trace is opened: the left-hand controls take that run's settings (`controls.control_order`),
    so Run repeats it on the loaded pair. A trace without a summary leaves the controls as they are;
    a knob the run did not use keeps its current value."""
    return controls_from_settings(session.settings if isinstance(session, Session) else None)


def on_load(session, position, request: gr.Request = None):
    """Show a shipped example trace before any model has been loaded: the one a teacher's link
    names (`/?trace=NAME`, forgiving about the name), else the first."""
    session = _session(session)
    examples = example_traces()
    query = dict(request.query_params) if request is not None else {}
    # a link to a live run (app/share.py) shows that run once it has decoded, not an example before it
    if not examples or session.records or "run" in query:
        return (session, *view(session, None, position))
    wanted = query.get("trace")
    first = next(iter(examples))
    title, path = (find_trace(wanted) if wanted else None) or (first, examples[first])
    return open_trace_file(session, path, title, "example", position)


def load_models(preset, custom_target, custom_draft, dtype="auto", progress=gr.Progress()):
    try:
        target_spec, draft_spec = resolve_pair(preset, custom_target, custom_draft)
    except ValueError as exc:
        raise app_error("model.detail", "title.pair", detail=exc) from None
    target, draft = load_pair_models(target_spec, draft_spec, True, progress, dtype or "auto")
    draft_name = (draft.name if not draft.n_params
                  else tr("status.draft_params", name=draft.name, params=f"{draft.n_params / 1e6:.0f}"))
    if draft.feature is not None:  # drafters/feature.py: say what it drafts from
        draft_name += tr("status.draft_feature", size=f"{draft.head.size:,}")
    elif draft.head is not None:  # a restricted output head (decoding/drafters/output_head.py): say what it drafts from
        draft_name += tr("status.draft_head", size=f"{draft.head.size:,}")
    precision = str(target.dtype).removeprefix("torch.")
    return tr("status.loaded", target=target.name, params=f"{target.n_params / 1e6:.0f}", device=target.device,
              precision=precision, draft=draft_name)


def on_preset(preset):
    """The pair changed (by the user or by a handler): the custom fields and the pair's note."""
    p = preset_by_label(preset)
    custom = p is not None and p.key == "custom"
    return gr.update(visible=custom), gr.update(visible=custom), preset_note(p)


def on_preset_input(preset, method, custom_draft):
    """The user picked a pair: its chat setting, and a warning when it cannot run the method chosen
    (the method stays: the user chose both; Run would say the same)."""
    p = preset_by_label(preset)
    problem = pair_problem(method, custom_draft if p is not None and p.key == "custom" else (p.draft if p else ""))
    near, _ = fitting_preset(method, preset, custom_draft or "")
    note = ""
    if problem:
        note = (tr("status.pick_method_or", problem=problem, pair=near.label) if near is not None
                else tr("status.pick_method", problem=problem))
    tree = p.draft_tree if p is not None else None
    # a pair that draws a tree sets the method's draft tree (the method stays the user's)
    return gr.update(value=p.chat if p else True), note, (gr.update(value=tree) if tree else gr.skip())


def on_method_input(method, preset, custom_draft):
    """The user picked a method: when the pair cannot run it, the nearest pair that can is chosen
    now, before Run, and the note beside the method says so (`presets.fitting_preset`)."""
    near, why = fitting_preset(method, preset, custom_draft or "")
    return (gr.update(value=near.label) if near is not None else gr.skip()), why


GALLERY_PREFIX = "gallery:"


def prompt_choices() -> list[tuple[str, str]]:
    """The explainer's example prompts: the classic examples, then the task gallery shared with the
    race (its labels carry what the benchmark measured for each prompt, assets/gallery.json)."""
    from ..gallery import gallery_choices

    return [(label, label) for label in EXAMPLE_PROMPTS] + [
        (f"Task gallery, {label}", GALLERY_PREFIX + ident) for label, ident in gallery_choices()]


def on_prompt_pick(choice):
    if isinstance(choice, str) and choice.startswith(GALLERY_PREFIX):
        from ..gallery import gallery_item

        item = gallery_item(choice[len(GALLERY_PREFIX):])
        return (item.prompt, True) if item is not None else (gr.skip(), gr.skip())
    prompt, chat = EXAMPLE_PROMPTS.get(choice, ("", True))
    return prompt, chat


def on_method(method, names: tuple[str, ...]):
    """Show the controls `method` uses (`names`: the toggled controls, in the layout's order)."""
    shown = visible_for(method)
    return tuple(gr.update(visible=name in shown) for name in names)
