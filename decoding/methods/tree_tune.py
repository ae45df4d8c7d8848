"""This device's draft-tree size: N and D chosen from measured speed, cached like PPD's hardware tune.

(Filled in below by `tune`; `tuned_size` reads the cache.)
"""

from __future__ import annotations

import json
from pathlib import Path

from ..lm.models import cache_dir
from .ppd.tuning import device_key


def tuning_path() -> Path:
    return cache_dir() / "draft_tree" / "tuning.json"


def _read() -> dict:
    try:
        return json.loads(tuning_path().read_text())
    except (OSError, ValueError):
        return {}


def entry_key(target, drafter) -> str:
    return f"{target.name} | {drafter.name}"


def tuned_size(target, drafter) -> tuple[int, int] | None:
    """The tuned (N, D) for this device (and precision), target and drafter; None when not tuned."""
    entry = _read().get(device_key(target), {}).get(entry_key(target, drafter))
    if not entry or "nodes" not in entry:
        return None
    return int(entry["nodes"]), int(entry["depth"])
