"""This device's draft-tree size, as the tune measured it: the cache `--draft-tree auto` reads.

The trade-off (EAGLE-2, Li et al., arXiv:2406.16858; PPD's hardware-aware size): a bigger tree accepts
more tokens per target pass, but its pass costs more (here, bfloat16 on a CPU: a pass over 9 new tokens
~1.14x a one-token step, 17 tokens ~1.35x; float32 far more) and each level is one more draft pass. So
the size is chosen by what it buys end to end: `tune` decodes the evaluation prompts greedily with each
candidate (N, D), the candidates interleaved per prompt (round-robin, so a noisy stretch on a shared
machine lands on all of them; `decoding/eval/tree_tune.py`), and keeps the one with the most tokens per
second of decoding, with its tokens per target call and the chain's for reference. The result is stored
per device key (device, CPU architecture, threads, the target's dtype: `ppd.tuning.device_key`) and per
target + drafter in `<cache dir>/draft_tree/tuning.json`; `--draft-tree auto` reads it (`tuned_size`).
The measuring itself is `decoding/eval/tree_tune.py`:

    python -m decoding.eval.tree_tune --draft hybrid:feature [--dtype bfloat16] [--sizes "8,4;16,6;24,7"]
"""

from __future__ import annotations

from pathlib import Path

from ..lm.models import cache_dir
from .ppd.tuning import device_key, read_table, store_entry


def tuning_path() -> Path:
    return cache_dir() / "draft_tree" / "tuning.json"


def _read() -> dict:
    return read_table(tuning_path())


def entry_key(target, drafter) -> str:
    return f"{target.name} | {drafter.name}"


def tuned_size(target, drafter) -> tuple[int, int] | None:
    """The tuned (N, D) for this device (and precision), target and drafter; None when not tuned."""
    entry = _read().get(device_key(target), {}).get(entry_key(target, drafter))
    if not entry or "nodes" not in entry:
        return None
    return int(entry["nodes"]), int(entry["depth"])


def save_tuning(target, drafter, entry: dict) -> Path:
    return store_entry(tuning_path(), device_key(target), entry_key(target, drafter), entry)
