"""How many model runs the app serves at once, and on how many torch threads each.

Measured on the 2-core CPU this app is developed on (`scripts/thread_layout.py`, 8 runs of 32
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

SLOTS_ENV = "SPECDEC_MODEL_SLOTS"
MAX_CPU_SLOTS = 8  # beyond this, one shared copy of the weights is better served by threads per run
GPU_SLOTS = 2


def model_slots() -> int:
    """The concurrency limit of the events that run a model."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{SLOTS_ENV} must be a whole number >= 1 (got {raw!r})") from None
        if value < 1:
            raise ValueError(f"{SLOTS_ENV} must be a whole number >= 1 (got {raw!r})")
        return value
    import torch

    from decoding.devices import usable_cores

    if torch.cuda.is_available():
        return GPU_SLOTS
    return max(1, min(usable_cores(), MAX_CPU_SLOTS))


def threads_per_run(slots: int) -> int:
    """Torch threads per run on a CPU: the usable cores shared out over the slots (at least one)."""
    from decoding.devices import usable_cores

    return max(1, usable_cores() // max(1, slots))


def configure(slots: int) -> int:
    """Set torch's intra-op threads for `slots` concurrent CPU runs; returns the thread count."""
    import torch

    threads = threads_per_run(slots)
    if not torch.cuda.is_available():
        torch.set_num_threads(threads)
    return threads
