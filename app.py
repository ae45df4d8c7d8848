"""Entry point: `python app.py` opens the speculative-decoding playground (also the Space's app_file).

Environment: SPECDEC_APP_TARGET / SPECDEC_APP_DRAFT replace the default model pair (tests use tiny
models); SPECDEC_MODEL_SLOTS sets how many model runs go at once (default: one per core on a CPU);
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address as usual.
"""

from app.capacity import configure, model_slots
from app.layout import build_demo, launch_kwargs

try:
    configure(model_slots())  # torch threads per run for the app's concurrent model slots
except ValueError as exc:  # a bad SPECDEC_MODEL_SLOTS: one line, not a traceback
    raise SystemExit(f"error: {exc}") from None
demo = build_demo()

if __name__ == "__main__":
    demo.launch(**launch_kwargs())
