"""The error boundary of the app's events: every failure's own message in a status line where the
user is looking, and the page left as it was.

Why not let handlers raise gr.Error? Gradio 6 shows a gr.Error's message in a toast only when the
status update that carries it also says `visible`. The server sends {"error", "title", "visible",
"duration"} for both kinds of events, but for an event outside the queue (queue=False) the
browser client turns the HTTP 500 answer into a status with the message only, and the page's
toast function defaults `visible` to false: the toast is dropped and only red "Error" badges
remain over the outputs (the old figures still beside them). Queued events do show the toast,
but it vanishes after a few seconds, far from the controls, and the badges stay.

So every event the app wires goes through `guard`: a gr.Error (or any exception) becomes the
message of the event's own status output (an alert role, next to the controls it came from), and
every other output gets gr.skip(), so the previous run, figures and state stay exactly as they were.
On success the status shows what the handler returned for it, or is cleared. Callers of the API
(gradio_client marks its requests with the header x-gradio-user: api) still get Gradio's error,
so scripts keep failing loudly.
"""

from __future__ import annotations

import functools
import html
import inspect
import logging

import gradio as gr

from .i18n import t
from .i18n.ui import with_language

log = logging.getLogger(__name__)

REQUEST_PARAM = "_guard_request"
SKIP = gr.skip()  # what gr.skip() returns: an update that changes nothing


def is_skip(value) -> bool:
    return isinstance(value, dict) and value == SKIP


class Status(str):
    """A status line's HTML, returned by a handler as its last value (see `guard`)."""


def status_html(message: str, kind: str = "info", title: str = "") -> Status:
    """The status line's HTML: `kind` is "error" (an alert), "info" or "ok"; text is escaped."""
    if not message and not title:
        return Status("")
    role = "alert" if kind == "error" else "status"
    head = f"<strong>{html.escape(title)}.</strong> " if title else ""
    icon = {"error": "⚠ ", "ok": "✓ "}.get(kind, "")
    return Status(f'<div class="app-status app-status-{html.escape(kind)}" role="{role}">{icon}{head}'
                  f"{html.escape(message)}</div>")


def error_status(exc: BaseException) -> Status:
    """The status line for an exception: a gr.Error's title and message, a ValueError's message,
    else a plain sentence (the traceback goes to the server log, never to the page). An exception
    that carries a message key (`decoding.errors.Keyed`, `i18n_errors.app_error`) is told in the
    session's language (`i18n_errors`)."""
    from .i18n_errors import message, title as keyed_title  # a keyed exception in the session's language

    if isinstance(exc, gr.Error):
        title = keyed_title(exc) or (exc.title if exc.title and exc.title != "Error" else t("common.error.title"))
        return status_html(message(exc), "error", title)
    if isinstance(exc, ValueError):
        return status_html(message(exc), "error", keyed_title(exc) or t("common.error.check_input"))
    log.exception("unexpected error in an app event")
    return status_html(t("common.error.unexpected"), "error", t("common.error.unexpected_title"))


def _from_api(request) -> bool:
    headers = getattr(request, "headers", None) or {}
    try:
        return str(headers.get("x-gradio-user", "")).lower() == "api"
    except AttributeError:
        return False


def guard(fn, n_outputs: int, clear: bool = True):
    """`fn` as an event handler with one more output at the end: the status line.

    `fn` returns (or yields) its `n_outputs` values (one value, not a tuple, when n_outputs is 1),
    optionally followed by the status: a `Status`, or gr.skip() to keep the line as it is. On
    success a missing status clears the line when `clear` (else leaves it as it is). On an exception every output but the status is gr.skip() and the
    status holds the message (`error_status`). Works for plain and generator handlers. The
    signature Gradio reads (inputs, gr.Progress, gr.Request, gr.EventData) is kept, with one more
    positional gr.Request at the end, to tell API callers, who get the exception itself."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params):
        raise TypeError(f"guard needs a handler with positional parameters only: {fn!r}")
    skips = tuple(gr.skip() for _ in range(n_outputs))
    idle = Status("") if clear else gr.skip()

    def finish(result):
        if n_outputs == 1:
            if isinstance(result, tuple) and len(result) == 2 and (isinstance(result[1], Status) or is_skip(result[1])):
                return result
            return (result, idle)
        result = tuple(result)
        if len(result) == n_outputs + 1:  # the handler's own status (a Status, or gr.skip() to keep it)
            return result
        if len(result) == n_outputs:
            return (*result, idle)
        raise ValueError(f"{getattr(fn, '__name__', fn)} returned {len(result)} values for {n_outputs} outputs")

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def handler(*args):
            *args, request = args
            try:
                for result in fn(*args):
                    yield finish(result)
            except Exception as exc:  # noqa: BLE001 - every failure becomes the status line
                if _from_api(request):
                    raise
                yield (*skips, error_status(exc))
    else:
        @functools.wraps(fn)
        def handler(*args):
            *args, request = args
            try:
                return finish(fn(*args))
            except Exception as exc:  # noqa: BLE001
                if _from_api(request):
                    raise
                return (*skips, error_status(exc))

    extra = inspect.Parameter(REQUEST_PARAM, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                              annotation=gr.Request)
    handler.__signature__ = sig.replace(parameters=[*params, extra])
    handler.__annotations__ = {**getattr(fn, "__annotations__", {}), REQUEST_PARAM: gr.Request}
    return handler


# the settings of a cheap event: outside the queue, no progress overlay, not part of the API
CHEAP = dict(queue=False, show_progress="hidden", api_name=False)


def on(trigger, fn, inputs, outputs, status, clear: bool = True, **kwargs):
    """Wire `fn` to `trigger` (an event listener, e.g. `button.click`) through the error boundary:
    its failures show in `status`, nothing else changes (`guard`). `clear`: a success clears the
    status line (else leaves it). While the page's Language is being built (`i18n.ui.begin`), the
    handler also gets the session's language and runs in it (`i18n.ui.with_language`), its messages
    included. Returns the event, for `.then` and `cancels`."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    # the boundary inside the language: a failure's status line is told in the session's language too
    handler, inputs = with_language(guard(fn, len(outputs), clear), inputs)
    return trigger(handler, inputs, [*outputs, status], **kwargs)
