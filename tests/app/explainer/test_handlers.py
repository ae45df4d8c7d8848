"""The Explainer's handlers on the tiny models, without a browser: one timeline (the panels, the
timeline and the player agree on the iteration shown; a finished run rests on its last informative
iteration), a new run replaces the old one everywhere (player included), a failure leaves the
previous run as it was, a pacing-0 run renders only the light panels while it decodes, and a
method the pair cannot run switches the pair before Run."""

import gradio as gr
import pytest

from app.explainer import handlers
from app.controls import DEFAULTS, method_controls
from app.session import Session, example_traces
from app.explainer.view import LIGHT, VIEW_OUTPUTS, view
from app.iterations import rest_index, timeline_index

def is_skip(value) -> bool:
    return value == gr.skip()
OUT = {name: i + 1 for i, name in enumerate(VIEW_OUTPUTS)}  # index in a handler's (session, *view, status)


@pytest.fixture()
def tiny_app(monkeypatch, tiny_target_dir, tiny_draft_dir):
    """The app's presets on the tiny pair (the first preset is the configured one)."""
    monkeypatch.setenv("SPECDEC_APP_TARGET", str(tiny_target_dir))
    monkeypatch.setenv("SPECDEC_APP_DRAFT", str(tiny_draft_dir))
    monkeypatch.setenv("SPECDEC_DTYPE", "float32")
    from app.presets import presets

    return presets()


def _values(presets, **over):
    values = {"preset": presets[0].label, "custom_target": "", "custom_draft": "", "prompt": "the cat sat",
              "chat": False, **{k: v for k, v in DEFAULTS.items()}, "max_new_tokens": 12, "position": 0}
    values.update({c.name: c.default for c in method_controls()})
    values.update(over)
    return values


def _call(fn, session, values):
    """Call a run handler (controls.with_run_inputs) with values by name; a list of its outputs."""
    args = [values[name] for name in fn.input_names]
    out = fn(session, *args, None)
    return list(out) if hasattr(out, "__next__") else [out]


def _rec(draft: bool):
    class R:  # what rest_index reads
        pass
    r = R()
    r.draft = [object()] if draft else []
    return r


def test_a_finished_run_rests_on_its_last_iteration_with_a_draft():
    assert rest_index([_rec(True), _rec(True), _rec(False)]) == 1
    assert rest_index([_rec(False), _rec(False)]) == 1  # plain decoding never drafts: the last
    assert rest_index([]) == -1
    assert timeline_index(5) == 4 and timeline_index(None) is None and timeline_index("x") is None


def test_an_opened_trace_rests_on_the_same_iteration_in_every_panel_and_the_player():
    title, path = next((t, p) for t, p in example_traces().items() if p.name.startswith("02_code_greedy"))
    session, *shown = handlers.open_trace_file(Session(), path, title, "example", 0)
    rest = rest_index(session.records)
    assert session.records[rest].draft and rest < len(session.records) - 1  # this trace ends without a draft
    timeline, player = shown[OUT["timeline"] - 1], shown[OUT["playback"] - 1]
    assert timeline["value"] == rest + 1 and timeline["minimum"] == 1 and timeline["maximum"] == len(session.records)
    assert player["current"] == rest and player["rest"] == rest and player["sync"] == "explainer"
    assert player["nonce"] == session.playback_id
    assert f"iteration</span><span class=\"v\">{rest + 1} of {len(session.records)}" in shown[OUT["stats"] - 1]
    assert "The whole run" in shown[OUT["stats"] - 1]  # shown before its end: the whole run's figures too
    assert f"Iteration {rest + 1}:" in shown[OUT["iter_caption"] - 1]
    # the timeline counts from 1: its value 1 is the first record
    first = handlers.show_iteration(session, 1, 0)
    assert first[VIEW_OUTPUTS.index("timeline")]["value"] == 1
    assert "Iteration 1:" in first[VIEW_OUTPUTS.index("iter_caption")]


def test_the_panels_follow_only_the_player_of_the_run_shown():
    title, path = next(iter(example_traces().items()))
    session = handlers.open_trace_file(Session(), path, title, "example", 0)[0]

    class Evt:
        def __init__(self, data):
            self._data = data

    out = handlers.follow_player(session, 0, Evt({"iteration": 3, "nonce": session.playback_id}))
    assert len(out) == len(VIEW_OUTPUTS) and out[VIEW_OUTPUTS.index("timeline")]["value"] == 4
    assert out[-1]["shown"] == {"nonce": session.playback_id, "iteration": 3}  # the player waits for this
    stale = handlers.follow_player(session, 0, Evt({"iteration": 3, "nonce": session.playback_id - 1}))
    assert all(is_skip(v) for v in stale)  # an older run's player moves nothing


def test_a_paced_run_starts_where_the_player_starts_and_replaces_the_old_run(tiny_app):
    title, path = next(iter(example_traces().items()))
    session = handlers.open_trace_file(Session(), path, title, "example", 0)[0]
    old = session.playback_id
    outs = _call(handlers.generate, session, _values(tiny_app, pacing=0.3))
    cleared, final = outs[0], outs[-1]
    assert "Decoding" in cleared[OUT["stats"]] and cleared[OUT["playback"]]["lanes"] == []  # the old run is gone
    player = final[OUT["playback"]]
    assert player["paced"] and player["current"] is None and player["nonce"] == session.playback_id != old
    assert final[OUT["timeline"]]["value"] == 1  # the panels at the first iteration, as the player
    times = sorted({t["time"] for t in player["lanes"][0]["tokens"]})
    assert times[0] == 0 and times == pytest.approx([0.3 * i for i in range(len(times))])
    assert "Done:" in final[-1] and "tokens/s" in final[-1]


def test_a_pacing_0_run_renders_only_the_light_panels_while_it_decodes(tiny_app, monkeypatch):
    monkeypatch.setattr(handlers, "LIGHT_SECONDS", 0.0)
    session = Session()
    outs = _call(handlers.generate, session, _values(tiny_app, pacing=0, temperature=0))
    streaming, final = outs[1:-1], outs[-1]
    assert streaming, "the run should stream"
    for out in streaming:
        for name in VIEW_OUTPUTS:
            assert is_skip(out[OUT[name]]) == (name not in LIGHT), name
    rest = rest_index(session.records)
    assert final[OUT["timeline"]]["value"] == rest + 1 and final[OUT["playback"]]["current"] == rest
    assert not any(is_skip(final[OUT[name]]) for name in ("pq_plot", "running", "tree"))


def test_a_failed_run_leaves_the_previous_run_as_it_was(tiny_app):
    session = Session()
    _call(handlers.step, session, _values(tiny_app))
    _call(handlers.step, session, _values(tiny_app))
    records, token = list(session.records), session.run_token
    with pytest.raises(gr.Error, match="prompt"):
        _call(handlers.generate, session, _values(tiny_app, prompt="x" * 5000))  # too long for the context
    with pytest.raises(gr.Error):
        _call(handlers.generate, session, _values(tiny_app, prompt=""))
    assert session.records == records and session.run_token == token and session.live
    # Step still continues the same run
    out = _call(handlers.step, session, _values(tiny_app))[0]
    assert len(session.records) == 3 and "Iteration 3" in out[-1]


def test_a_replaced_run_stops_decoding(tiny_app):
    session = Session()
    run = handlers.generate.__wrapped__(session, _values(tiny_app, pacing=0, max_new_tokens=40, temperature=0), None)
    next(run)  # started: the cleared view
    session.reset_run()  # another event replaced the run (a lesson chapter, Reset)
    assert list(run) == [] and session.records == []


def test_a_method_the_pair_cannot_run_switches_the_pair_before_run(tiny_app):
    from app.presets import pair_problem, preset_by_label

    lookup = next(p for p in tiny_app if p.draft == "prompt-lookup")
    preset, note = handlers.on_method_input("mjsd", lookup.label, "")
    assert preset["value"] != lookup.label and not pair_problem("mjsd", preset_by_label(preset["value"]).draft)
    assert "MJSD" in note and "switched" in note
    preset, note = handlers.on_method_input("speculative", lookup.label, "")
    assert is_skip(preset) and note == ""
    # a pair picked afterwards that cannot run the method says so, and Run says which pair can
    chat, warning, tree = handlers.on_preset_input(lookup.label, "mjsd", "")
    assert "pick another method" in warning
    with pytest.raises(gr.Error, match="Choose the pair"):
        handlers.settings_from_values(_values(tiny_app, preset=lookup.label, method="mjsd"))


def test_opening_a_trace_moves_the_pair_to_one_that_can_run_it(tiny_app):
    titles = {p.name: t for t, p in example_traces().items()}
    lookup = next(p for p in tiny_app if p.draft == "prompt-lookup")
    out = handlers.open_example(Session(), titles["06_code_mjsd_beams4_tau0.1.jsonl"], 0, lookup.label, "")
    preset, note, status = out[-3], out[-2], out[-1]
    from app.presets import pair_problem, preset_by_label

    assert not pair_problem("mjsd", preset_by_label(preset["value"]).draft) and "MJSD" in note
    assert "press ▶ Run" in status


def test_the_tree_preset_sets_the_draft_tree(monkeypatch):
    """Picking the feature draft's tree preset turns the speculative method's draft tree on (auto); other
    pairs leave it as it is."""
    from app import presets

    monkeypatch.delenv("SPECDEC_APP_TARGET", raising=False)
    offline = presets.presets()
    tree = next(p for p in offline if p.draft_tree)
    _, note, update = handlers.on_preset_input(tree.label, "speculative", "")
    assert update["value"] == "auto" and note == ""
    other = next(p for p in offline if not p.draft_tree)
    assert is_skip(handlers.on_preset_input(other.label, "speculative", "")[2])
    assert "draft_tree" in {c.name for c in method_controls()}
