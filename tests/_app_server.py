"""Launch the Gradio app in this process on a free localhost port (shared by the client and
browser tests). The tiny random models of conftest.py stand in for the default pair."""

from __future__ import annotations

import contextlib
import os
import socket


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(target_dir, draft_dir, with_demo: bool = False):
    """Yield the URL of the app built on the tiny pair (with `with_demo`, the URL and the Blocks,
    whose `state_holder` holds the sessions); close the server afterwards. `draft_dir` may be any
    draft spec, e.g. "hybrid:<feature draft dir>"."""
    old = {k: os.environ.get(k) for k in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT", "GRADIO_ANALYTICS_ENABLED",
                                          "SPECDEC_DTYPE")}
    os.environ["SPECDEC_DTYPE"] = "float32"  # the reference precision: greedy runs are compared token for token
    os.environ["SPECDEC_APP_TARGET"] = str(target_dir)
    os.environ["SPECDEC_APP_DRAFT"] = str(draft_dir)
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from app.layout import build_demo, launch_kwargs

    demo = build_demo()
    port = free_port()
    try:
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **launch_kwargs())
        url = f"http://127.0.0.1:{port}/"
        yield (url, demo) if with_demo else url
    finally:
        demo.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
