"""Opening a trace (an upload or a shipped example) moves the left-hand controls to that run's
settings, so Run repeats it; a file that is not a trace leaves the session exactly as it was."""

from pathlib import Path

import gradio as gr
import pytest

from app.session import Session
from decoding.paths import EXAMPLES

from _siblings import load_test_module

_bad_files = load_test_module("decoding/run/test_trace_file.py")._bad_files


def test_opening_a_trace_moves_the_controls_to_its_settings():
    """Open an example trace: the controls take its method, knobs and sampling settings."""
    from app.controls import CONTROL_ORDER
    from app.explainer.handlers import controls_from_session, open_example
    from app.session import example_traces

    titles = {Path(path).name: title for title, path in example_traces().items()}
    session = open_example(Session(), titles["07_list_ppd_tree16.jsonl"], 0)[0]
    values = dict(zip(CONTROL_ORDER, controls_from_session(session)))
    assert values["method"] == "ppd" and values["tree_budget"] == 16 and values["temperature"] == 0.0
    assert values["prompt"] == "List the days of the week, one per line." and values["chat"] is True
    assert values["max_new_tokens"] == 48
    session = open_example(Session(), titles["05_question_mentored_kl0.3.jsonl"], 0)[0]
    values = dict(zip(CONTROL_ORDER, controls_from_session(session)))
    assert values["method"] == "mentored" and values["kl_bound"] == pytest.approx(0.3)
    # no summary (or no session): nothing moves
    assert all(isinstance(v, type(gr.skip())) for v in controls_from_session(Session()))


EXAMPLE = EXAMPLES / "01_list_copy_speculative.jsonl"


def test_a_failed_open_leaves_the_session_as_it_was(tmp_path):
    from app.explainer.handlers import open_example, open_trace
    from app.presets import presets
    from app.session import Session

    session = open_example(Session(), next(iter(__import__("app.session").session.example_traces())), 0)[0]
    before = (list(session.records), session.summary, session.settings, session.source, session.title)
    for name, path, message in _bad_files(tmp_path):
        with pytest.raises(gr.Error) as info:
            open_trace(session, str(path), 0, presets()[0].label, "")
        assert message in str(info.value) and info.value.title == "Not a trace file", name
        assert (session.records, session.summary, session.settings, session.source, session.title) == before, name
