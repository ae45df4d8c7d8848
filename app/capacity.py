"""How many model runs the app serves at once, and on how many torch threads each.

On a CPU the runs share their forward passes (cross-run batching, decoding/lm/batching.py): up to
`BATCHED_SLOTS` runs decode at once, one worker thread runs every pass on all usable cores, and a
pass over eight runs' tokens costs little more than one run's. Measured with
`experiments/thread_layout.py --runs 16 --max-new-tokens 32 --draft hybrid` (bfloat16, greedy):
see docs/experiments.md and docs/classroom.md. `SPECDEC_CROSS_RUN_BATCHING=0` turns it off; the app then
uses the layout below, measured before batching existed:

Measured on the 2-core CPU this app is developed on (`experiments/thread_layout.py`, 8 runs of 32
tokens of the default set-up in bfloat16, three runs of the script): two runs at once on one torch
thread each served the batch 1.17-1.30x faster than one run at a time on two threads (a 135M model
keeps little of a second core busy inside one forward pass, and Python overhead between passes
leaves it idle), with the same greedy tokens. Two worker processes instead of threads did only a
little better (1.27x against 1.17x for threads in the same run): the cores, not the GIL, are the limit. So on a
CPU the app opens one model slot per usable core and gives torch one thread per run; on a GPU the
runs share one device, so two slots overlap one run's Python work with the other's kernels.
`SPECDEC_MODEL_SLOTS` overrides the count (the thread rule follows it).
"""

from __future__ import annotations

import os

# The queue: model runs beyond the slots wait in it, each page showing its place in line and
# Gradio's estimate of the wait; a full queue refuses. A waiting run costs the server a request
# body, so the room is sized for a lecture hall, not for memory: 60 students who press Run twice,
# and the other events that queue, fit (`make class-hall` measures 60 at once).
QUEUE_SIZE = 160
# Gradio keeps a state per browser session (about 0.7 MB here: a copy of every component's config
# and the last values shown, beside the app's own Session) until it has this many sessions, then drops
# the least recently used. Gradio's default, 10,000, lets a public Space grow to ~7 GB over a busy
# day; 2,000 bounds it to ~1.4 GB while dropping only sessions unused for hundreds of visitors.
SESSION_CAPACITY = 2000

SLOTS_ENV = "SPECDEC_MODEL_SLOTS"
THREADS_ENV = "SPECDEC_TORCH_THREADS"  # torch's intra-op threads for the app's passes (default: `threads_per_run`)
BATCHING_ENV = "SPECDEC_CROSS_RUN_BATCHING"
BATCHED_SLOTS = 8  # runs decoding at once on a CPU with batching: a pass over 8 costs ~1.5-2.5x one
MAX_CPU_SLOTS = 8  # beyond this, one shared copy of the weights is better served by threads per run
GPU_SLOTS = 2


def model_events() -> dict:
    """The settings of an event that runs a model: the app's one concurrency group of `model_slots` slots."""
    return dict(concurrency_limit=model_slots(), concurrency_id="model")


def _whole_number(env: str) -> int | None:
    """The environment variable `env` as a whole number >= 1, None where it is unset or empty; ValueError
    naming the variable otherwise."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{env} must be a whole number >= 1 (got {raw!r})") from None
    if value < 1:
        raise ValueError(f"{env} must be a whole number >= 1 (got {raw!r})")
    return value


def model_slots() -> int:
    """The concurrency limit of the events that run a model."""
    value = _whole_number(SLOTS_ENV)
    if value is not None:
        return value
    import torch

    from decoding.lm.devices import usable_cores

    if torch.cuda.is_available():
        return GPU_SLOTS
    if batching_on():
        return BATCHED_SLOTS
    return max(1, min(usable_cores(), MAX_CPU_SLOTS))


def batching_on() -> bool:
    """Cross-run batching: on for CPU runs unless SPECDEC_CROSS_RUN_BATCHING is 0 (on a GPU each
    run keeps its own passes; on ZeroGPU each run decodes in its own GPU call)."""
    raw = os.environ.get(BATCHING_ENV, "1").strip().lower()
    if raw not in ("0", "1", "false", "true", "off", "on", ""):
        raise ValueError(f"{BATCHING_ENV} must be 0 or 1 (got {raw!r})")
    import torch

    from .zerogpu import on_zerogpu

    return raw not in ("0", "false", "off") and not torch.cuda.is_available() and not on_zerogpu()


def threads_per_run(slots: int) -> int:
    """Torch threads per forward pass on a CPU: every usable core when the runs' passes are batched
    (one pass at a time), else the usable cores shared out over the slots (at least one).
    SPECDEC_TORCH_THREADS sets the count instead."""
    from decoding.lm.devices import usable_cores

    value = _whole_number(THREADS_ENV)
    if value is not None:
        return value

    if batching_on():
        return usable_cores()
    return max(1, usable_cores() // max(1, slots))


# the allocator heaps the app's process keeps (see `configure`); `make class-soak` measures the effect
HEAP_ARENAS = 2


def configure(slots: int) -> int:
    """Set torch's intra-op threads for `slots` concurrent CPU runs, turn on cross-run batching
    where it applies, and keep the allocator's heaps to HEAP_ARENAS (`procstat.limit_heap_arenas`:
    with one heap per worker thread, each burst of new visitors left the server's memory higher);
    returns the thread count."""
    import torch

    from decoding.eval.procstat import limit_heap_arenas
    from decoding.lm import batching

    limit_heap_arenas(HEAP_ARENAS)

    threads = threads_per_run(slots)
    if not torch.cuda.is_available():
        torch.set_num_threads(threads)
    if batching_on() and slots > 1:
        batching.enable(max_batch=slots)
    return threads
