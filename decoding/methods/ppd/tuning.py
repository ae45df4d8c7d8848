"""The hardware-aware tuning cache: n*, L(n), T(n) and the acceptance table per device and model.

`python -m decoding.methods.ppd tune` (see `hardware.py` for the measurements) stores one entry per device
key (device, CPU architecture and thread count, weights' dtype) and model name in
`<cache dir>/ppd/tuning.json`; `--method ppd` reads its default tree size and acceptance table
from here, and the app plots the curves.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import torch

from ...lm.models import cache_dir
from .tree import dynamic_trees


def device_key(target) -> str:
    """What the target's L(n) depends on: its device (CPU: architecture and thread count) and its
    weights' dtype (a bfloat16 target has a different latency curve from a float32 one)."""
    device = torch.device(target.device)
    if device.type == "cuda":
        key = f"cuda:{torch.cuda.get_device_name(device)}"
    else:
        key = f"{device.type}:{platform.machine()}:{platform.processor() or 'cpu'}:{torch.get_num_threads()}threads"
    return f"{key}:{str(target.dtype).removeprefix('torch.')}"


def tuning_path() -> Path:
    return cache_dir() / "ppd" / "tuning.json"


def read_table(path: Path) -> dict:
    """A tuning file's {device key: {name: entry}} ({} where absent or unreadable)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def store_entry(path: Path, device: str, name: str, entry: dict) -> Path:
    """Write `entry` under `device` and `name` into the tuning file at `path` (atomically: a reader
    never sees half a file)."""
    data = read_table(path)
    data.setdefault(device, {})[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return path


def _read() -> dict:
    return read_table(tuning_path())


def save_tuning(target, entry: dict) -> Path:
    return store_entry(tuning_path(), device_key(target), target.name, entry)


def cached_tuning(target) -> dict | None:
    return _read().get(device_key(target), {}).get(target.name)


def cached_tuning_for(target, embeddings_source: str) -> dict | None:
    """This device and model's tuning entry when it was made with these prompt embeddings."""
    entry = cached_tuning(target)
    return entry if entry and entry.get("embeddings") == embeddings_source else None


def cached_choice(target, embeddings_source: str | None = None) -> int | None:
    """The tuned tree size n* for this device and model (None when not tuned, or tuned with other
    prompt embeddings)."""
    entry = cached_tuning(target) if embeddings_source is None else cached_tuning_for(target, embeddings_source)
    if not entry or "tree_size" not in entry:
        return None
    return int(entry["tree_size"])


def tuning_curves(target, m: int = 3, ept: int = 1) -> dict | None:
    """What the app plots: the tuned L(n) (ms), T(n) and relative Speedup(n) on this device, plus
    the dynamic-tree model's expected tokens per step at the same sizes (Prop. 4.4 with the
    measured acceptance table). None when this device/model has not been tuned."""
    entry = cached_tuning(target)
    if not entry or not all(k in entry for k in ("latency_s", "tokens_per_step", "speedup_rel", "tree_size")):
        return None
    sizes = sorted(int(n) for n in entry["latency_s"])
    get = lambda d, n: d.get(str(n), d.get(n))  # noqa: E731  JSON keys are strings
    return {
        "n": sizes,
        "latency_ms": [1000 * get(entry["latency_s"], n) for n in sizes],
        "tokens_per_step": [get(entry["tokens_per_step"], n) for n in sizes],
        "speedup_rel": [get(entry["speedup_rel"], n) for n in sizes],
        "model_tokens_per_step": [dynamic_trees(n, m, ept, entry.get("acceptance")).expected_tokens_per_step
                                  if n >= ept else None for n in sizes],
        "chosen": int(entry["tree_size"]),
        "embeddings": entry.get("embeddings"),
        "device": device_key(target),
    }
