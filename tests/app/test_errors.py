"""The error boundary (app/errors.py): every failure becomes its own message in the event's status line,
every other output is left as it was (gr.skip()), API callers still get the exception, and the
signature Gradio reads (inputs, gr.Progress, gr.Request, gr.EventData) survives the wrapping."""

import inspect

import gradio as gr
import pytest

from app.errors import REQUEST_PARAM, Status, error_status, guard, status_html


class _Request:
    def __init__(self, headers=None):
        self.headers = headers or {}


BROWSER, API = _Request(), _Request({"x-gradio-user": "api"})
def is_skip(value) -> bool:
    return value == gr.skip()


def test_a_failure_becomes_the_status_line_and_changes_nothing_else():
    def handler(a, b):
        raise gr.Error("p (target) must sum to 1", title="Check p, q and lenience")

    out = guard(handler, 3)(1, 2, BROWSER)
    assert len(out) == 4 and all(is_skip(v) for v in out[:3])
    assert 'role="alert"' in out[3] and "Check p, q and lenience." in out[3] and "must sum to 1" in out[3]
    with pytest.raises(gr.Error):  # gradio_client marks its calls: scripts keep failing loudly
        guard(handler, 3)(1, 2, API)


def test_a_success_clears_or_keeps_the_status_and_can_set_it():
    assert guard(lambda: (1, 2), 2)(BROWSER) == (1, 2, "")
    kept = guard(lambda: (1, 2), 2, clear=False)(BROWSER)
    assert kept[:2] == (1, 2) and is_skip(kept[2])
    said = guard(lambda: (1, 2, status_html("Done", "ok")), 2)(BROWSER)
    assert said[:2] == (1, 2) and "Done" in said[2] and 'role="status"' in said[2]
    # one output: its value may itself be a list (a table), never taken for several outputs
    assert guard(lambda: [[1, 2], [3, 4]], 1)(BROWSER) == ([[1, 2], [3, 4]], "")
    with pytest.raises(ValueError, match="returned 4 values for 2 outputs"):  # a wiring mistake: loud
        guard(lambda: (1, 2, 3, 4), 2)(API)


def test_generators_stream_then_a_late_failure_keeps_what_was_shown():
    def handler(x):
        yield (x, status_html("Decoding…"))
        yield (x + 1, gr.skip())
        raise gr.Error("The run stopped: out of memory")

    wrapped = guard(handler, 1)
    assert inspect.isgeneratorfunction(wrapped)
    out = list(wrapped(1, BROWSER))
    assert out[0][0] == 1 and "Decoding" in out[0][1] and out[1][0] == 2
    assert is_skip(out[2][0]) and "out of memory" in out[2][1]


def test_other_exceptions_say_something_plain_without_a_traceback():
    def broken():
        return {}["missing"]

    out = guard(broken, 2)(BROWSER)
    assert "Something went wrong" in out[2] and "KeyError" not in out[2] and "Traceback" not in out[2]
    assert "Check the input" in error_status(ValueError("gamma must be a whole number"))
    assert "&lt;b&gt;" in status_html("<b>", "error")  # text is escaped, never HTML
    assert status_html("") == "" and isinstance(status_html("x"), Status)


def test_the_signature_gradio_reads_is_kept():
    def handler(session, value, evt: gr.EventData, progress=gr.Progress()):
        return session, value

    wrapped = guard(handler, 2)
    params = list(inspect.signature(wrapped).parameters)
    assert params == ["session", "value", "evt", "progress", REQUEST_PARAM]
    hints = __import__("typing").get_type_hints(wrapped)
    assert hints["evt"] is gr.EventData and hints[REQUEST_PARAM] is gr.Request
    # Gradio passes the special arguments positionally, the request last
    assert guard(lambda a, b: (a, b), 2)("x", "y", BROWSER) == ("x", "y", "")
    with pytest.raises(TypeError, match="positional parameters only"):
        guard(lambda *args: args, 1)
