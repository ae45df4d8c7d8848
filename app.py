"""Entry point: `python app.py` opens the speculative-decoding playground (also the Space's app_file).

Environment: SPECDEC_APP_TARGET / SPECDEC_APP_DRAFT replace the default model pair (tests use tiny
models); SPECDEC_MODEL_SLOTS sets how many model runs go at once (default on a CPU: 8 sharing batched forward
passes; SPECDEC_CROSS_RUN_BATCHING=0 turns the batching off, and then one run per core); SPECDEC_TORCH_THREADS
sets torch's threads (default: every usable core while batching, else the cores shared out over the runs);
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address as usual. On ZeroGPU (SPACES_ZERO_GPU set)
the preset pairs load at start-up and each run decodes in one GPU call; on another CUDA GPU the first preset's pair
is warmed up in the background at start-up (its compile and graph captures, app/zerogpu.py).
"""

import sys

from app.zerogpu import on_zerogpu, preload, warm_up_on_gpu

if on_zerogpu():  # ZeroGPU asks for `spaces` before torch is imported (it patches torch's CUDA calls)
    import spaces  # noqa: F401

from app.capacity import configure, model_slots
from app.layout import build_demo, launch_kwargs
from app.presets import presets

try:
    configure(model_slots())  # torch threads and cross-run batching for the app's concurrent model slots
except ValueError as exc:  # a bad SPECDEC_MODEL_SLOTS or SPECDEC_TORCH_THREADS: one line on stderr, exit 2 (bad input)
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None
if on_zerogpu():  # ZeroGPU: the preset pairs load at start-up, on the GPU each call gets
    for problem in preload([(p.target, p.draft) for p in presets() if p.key != "custom"]):
        print(f"warning: preset not loaded: {problem}")
demo = build_demo()

if __name__ == "__main__":
    warm_up_on_gpu(presets()[0].target, presets()[0].draft)  # a dedicated GPU: compile and capture before a visitor
    demo.launch(**launch_kwargs())
