"""Entry point: `python app.py` opens the speculative-decoding playground (also the Space's app_file).

Environment: SPECDEC_APP_TARGET / SPECDEC_APP_DRAFT replace the default model pair (tests use tiny
models); GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address as usual.
"""

from app.layout import build_demo, launch_kwargs

demo = build_demo()

if __name__ == "__main__":
    demo.launch(**launch_kwargs())
