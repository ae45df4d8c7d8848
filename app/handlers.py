"""The explainer's event handlers: Run, Step, Stop, Reset, the timeline, opening traces, loading
models and the controls' small reactions. Each returns the session and the `view.view` outputs.

Run and Step take the run inputs that `controls.run_input_names` lists (derived from the method
registry), so a new method setting reaches them without touching this file.
"""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from decoding.batching import sharing

from . import charts
from .controls import controls_from_settings, visible_for, with_run_inputs
from .live import advance, load_models as load_pair_models, settings_from_values, start
from .packed import pack
from .player import empty_data, lane_data, player_data
from .presets import preset_by_label, resolve_pair
from .session import Session, example_traces, find_trace, read_trace
from .settings import settings_from_summary
from .view import view
from .view_common import iteration_index, position_index
from .zerogpu import on_zerogpu

ZEROGPU_STEP_NOTE = ("On this shared-GPU Space one GPU call computed the whole run at once; Step reveals it one "
                     "iteration at a time.")
REFRESH_SECONDS = 0.2  # heavy panels refresh at most ~5 times a second when pacing is off

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


PLAYBACK_IDLE = ("A run with pacing above 0 plays here, in your browser, at that pace. The server decodes it at "
                 "full speed first, so a whole class can press Run at once; Replay and slow motion cost nothing.")
MAX_PACING = 5.0


def pacing_seconds(value) -> float:
    """The pacing control's seconds per iteration, clamped to [0, MAX_PACING] (0 for a bad value)."""
    try:
        pacing = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, min(pacing, MAX_PACING)) if pacing == pacing else 0.0


def shared_note(before: tuple[int, int]) -> str:
    """What a run's speed means when the server batched it with other runs (decoding/batching.py),
    from the batcher's (passes, calls) at the run's start; "" when it ran (almost) alone."""
    passes, calls = (now - then for now, then in zip(sharing(), before))
    if passes <= 0 or calls / passes < 1.05:
        return ""
    return (f"While it decoded, the server's forward passes served {calls / passes:.1f} runs each on average "
            "(other students' runs share them): its speed is its share of this machine, not the method's alone.")


def playback_data(session: Session, pacing: float, shared: str = "") -> dict:
    """The session's run as one lane of the browser player (`player.py`): iteration i appears at
    (i + 1) x `pacing` seconds. The figures shown at the end are the run's measured ones; `shared`
    (shared_note) follows them."""
    from .race_result import lane_name

    records, summary = session.records, session.summary
    times = [pacing * (i + 1) for i in range(len(records))]
    lane = lane_data("▶", records, summary, name=lane_name(summary) if summary is not None else "", times=times)
    result = ""
    if summary is not None:
        result = (f"Decoded in {summary.wall_seconds:.2f} s ({summary.tokens_per_second:.1f} tokens/s), played back at "
                  f"{pacing:g} s per iteration. Drag the timeline below to inspect any iteration."
                  + (f" {shared}" if shared else ""))
    return player_data([lane], title=f"Playback: {len(records)} iterations, {pacing:g} s each",
                       prompt=session.settings.prompt if session.settings is not None else "", result=result,
                       paced=True)


@with_run_inputs(extra=("pacing", "position"))
def generate(session, values: dict, progress):
    """Run (or continue a stepped run with the same settings) to the end.

    Pacing 0 streams the panels as the run decodes. A pacing above 0 never sleeps on the server:
    the run decodes at full speed inside its model slot (reporting progress only), and its records
    go to the browser player, which plays them at that pace (so a paced run holds the model no
    longer than an unpaced one)."""
    session = _session(session)
    settings = settings_from_values(values)
    position = values["position"]
    session.stop_requested = False
    if not (session.live and session.settings is not None and session.settings.key() == settings.key()):
        start(session, settings, progress)
    pacing = pacing_seconds(values["pacing"])
    before = sharing()
    last_yield = time.monotonic()
    tokens = sum(len(r.emitted) for r in session.records)
    while session.generator is not None and not session.stop_requested:
        record = advance(session)
        if record is None:
            break
        tokens += len(record.emitted)
        if session.generator is None:
            break
        if pacing > 0:
            if progress is not None:
                progress((min(tokens, settings.max_new_tokens), settings.max_new_tokens), desc="Decoding",
                         unit="tokens")
        elif time.monotonic() - last_yield >= REFRESH_SECONDS:
            yield (session, *view(session, None, position))
            last_yield = time.monotonic()
    shared = shared_note(before)
    playback = playback_data(session, pacing, shared) if pacing > 0 and session.records else None
    if session.stop_requested and session.live:
        yield (session, *view(session, None, position, final=True, playback=playback,
                              note="Stopped. Step continues this run; Run continues it to the end."))
        return
    yield (session, *view(session, None, position, final=True, playback=playback, note=shared))


@with_run_inputs(extra=("position",))
def step(session, values: dict, progress):
    """Advance exactly one iteration (starting a run first when none is live with these settings)."""
    session = _session(session)
    settings = settings_from_values(values)
    session.stop_requested = False
    note = ""
    if not (session.live and session.settings is not None and session.settings.key() == settings.key()):
        if session.live:
            note = "Settings changed: a new run started."
        start(session, settings, progress)
    if on_zerogpu():
        note = (note + " " if note else "") + ZEROGPU_STEP_NOTE
    record = advance(session)
    if record is None and not session.records:
        note = "The run produced no iteration."
    return (session, *view(session, None, values["position"], final=session.generator is None, note=note))


def stop(session, position):
    """Cancel a streaming run; the iterations so far stay on the timeline and Step continues."""
    session = _session(session)
    session.stop_requested = True
    if not session.records:
        return (session, *view(session, None, position, note="Stopped."))
    note = ("Stopped. Step continues this run; Run continues it to the end." if session.live
            else "Stopped (the run had already finished).")
    return (session, *view(session, None, position, final=True, note=note))


def reset(session, position):
    session = _session(session)
    session.reset_run()
    session.settings = None
    session.source = "none"
    return (session, *view(session, None, position, note="Cleared. Run or Step starts a new run.",
                           playback=empty_data(PLAYBACK_IDLE)))


def show_iteration(session, upto, position):
    return view(_session(session), upto, position)


def show_position(session, upto, position):
    from . import charts_methods

    session = _session(session)
    if not session.records:
        return charts.empty_figure("No run yet."), gr.skip()
    record = session.records[iteration_index(session.records, upto)]
    mentored = (charts_methods.mentored_output_figure(record, position_index(position))
                if record.method == "mentored" else gr.skip())
    return charts.pq_figure(record, position_index(position)), mentored


def open_trace_file(session: Session, path, title: str, source: str, position):
    try:
        records, summary = read_trace(path)
    except (OSError, ValueError) as exc:
        # the title in the text too: Gradio's toast shows its own heading, not the title
        raise gr.Error(f"Not a trace file: {exc}", title="Not a trace file") from None
    session.reset_run()
    session.records, session.summary = pack(records), summary  # kept compactly (packed.py)
    session.settings = settings_from_summary(summary)
    session.source, session.title = source, title
    session.target = session.draft = None
    models = summary.models if summary is not None else {}
    session.target_bytes = models.get("target_weight_bytes")
    session.draft_bytes = models.get("draft_weight_bytes")
    return (session, *view(session, None, position, final=True, playback=empty_data(PLAYBACK_IDLE)))


def open_trace(session, file, position):
    session = _session(session)
    if not file:
        raise gr.Error("No file received.")
    path = file if isinstance(file, str) else getattr(file, "name", None)
    return open_trace_file(session, path, Path(path).name, "trace", position)


def open_example(session, title, position):
    session = _session(session)
    examples = example_traces()
    if title not in examples:
        return (session, *view(session, None, position, note="No example traces shipped."))
    return open_trace_file(session, examples[title], title, "example", position)


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
    if not examples or session.records:
        return (session, *view(session, None, position))
    wanted = dict(request.query_params).get("trace") if request is not None else None
    first = next(iter(examples))
    title, path = (find_trace(wanted) if wanted else None) or (first, examples[first])
    return open_trace_file(session, path, title, "example", position)


def load_models(preset, custom_target, custom_draft, dtype="auto", progress=gr.Progress()):
    try:
        target_spec, draft_spec = resolve_pair(preset, custom_target, custom_draft)
    except ValueError as exc:
        raise gr.Error(str(exc)) from None
    target, draft = load_pair_models(target_spec, draft_spec, True, progress, dtype or "auto")
    draft_name = draft.name if not draft.n_params else f"{draft.name} ({draft.n_params / 1e6:.0f}M parameters)"
    if draft.feature is not None:  # feature_draft.py: say what it drafts from
        draft_name += (f", drafting from the target's own hidden states over the target's {draft.head.size:,} "
                       "most frequent tokens")
    elif draft.head is not None:  # a restricted output head (decoding/output_head.py): say what it drafts from
        draft_name += f", drafting only the target's {draft.head.size:,} most frequent tokens"
    precision = str(target.dtype).removeprefix("torch.")
    return (f"Loaded target **{target.name}** ({target.n_params / 1e6:.0f}M parameters, {target.device}, {precision}) "
            "and draft "
            f"**{draft_name}**. Run or Step to decode.")


def on_preset(preset):
    p = preset_by_label(preset)
    custom = p is not None and p.key == "custom"
    note = f"{p.note}" if p and p.note else ""
    return gr.update(visible=custom), gr.update(visible=custom), gr.update(value=p.chat if p else True), note


GALLERY_PREFIX = "gallery:"


def prompt_choices() -> list[tuple[str, str]]:
    """The explainer's example prompts: the classic examples, then the task gallery shared with the
    race (its labels carry what the benchmark measured for each prompt, docs/bench/gallery.json)."""
    from .gallery import gallery_choices

    return [(label, label) for label in EXAMPLE_PROMPTS] + [
        (f"Task gallery, {label}", GALLERY_PREFIX + ident) for label, ident in gallery_choices()]


def on_prompt_pick(choice):
    if isinstance(choice, str) and choice.startswith(GALLERY_PREFIX):
        from .gallery import gallery_item

        item = gallery_item(choice[len(GALLERY_PREFIX):])
        return (item.prompt, True) if item is not None else (gr.skip(), gr.skip())
    prompt, chat = EXAMPLE_PROMPTS.get(choice, ("", True))
    return prompt, chat


def on_method(method, names: tuple[str, ...]):
    """Show the controls `method` uses (`names`: the toggled controls, in the layout's order)."""
    shown = visible_for(method)
    return tuple(gr.update(visible=name in shown) for name in names)
