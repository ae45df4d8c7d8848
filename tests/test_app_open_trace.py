"""Opening a trace (an upload or a shipped example) moves the left-hand controls to that run's
settings, so Run repeats it."""

from pathlib import Path

import gradio as gr
import pytest

from app.session import Session


def test_opening_a_trace_moves_the_controls_to_its_settings():
    """Open an example trace: the controls take its method, knobs and sampling settings."""
    from app.controls import CONTROL_ORDER
    from app.handlers import controls_from_session, open_example
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
