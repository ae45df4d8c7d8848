"""The drafter a GPU Space should start with, chosen from what the GPU check's benchmark measured.

The bench part measures the default target with every offline drafter (the distilled draft, the
hybrid, prompt lookup) at a fixed and at the automatic gamma. `fastest_drafter` picks the
speculative variant with the highest measured speedup over our autoregressive decoding in the
same run; `write_choice` keeps it, with the device and precision, in docs/gpu-choice.json, which
the app's presets read on a GPU (app/presets.py). Without that file the app makes no GPU claim.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...paths import DOCS, display_path

CHOICE_FILE = DOCS / "gpu-choice.json"
DRAFTERS = ("distilled", "hybrid", "prompt-lookup")  # the offline drafters a preset can name


def fastest_drafter(bench: dict) -> dict | None:
    """{"drafter", "gamma", "speedup", "alpha", "c", "tokens_per_call"} of the fastest speculative
    variant of one benchmark result (`bench.json`), or None when it has none faster than plain decoding."""
    best = None
    for name, m in (bench.get("methods") or {}).items():
        speedup = (bench.get("speedup") or {}).get(name)
        if m.get("engine") != "ours" or m.get("method") != "speculative" or m.get("draft") not in DRAFTERS:
            continue
        if not isinstance(speedup, (int, float)) or speedup <= 1.0:
            continue
        if best is None or speedup > best["speedup"]:
            gamma = m.get("gamma") if m.get("schedule") in (None, "fixed") else m.get("schedule")
            best = {"drafter": m["draft"], "gamma": gamma, "speedup": round(float(speedup), 3),
                    "alpha": m.get("alpha"), "c": m.get("c"), "tokens_per_call": m.get("tokens_per_target_call")}
    return best


def choice_from_runs(info: dict, runs: list[dict], dtype: str | None = None) -> dict | None:
    """The choice over the bench part's runs (each with its `fastest`), for the default target only,
    and, given `dtype`, only among runs in that precision: the one the app loads in on this GPU.
    (A drafter's speedup on one GPU can be above 1 in float32 and below 1 in bfloat16, the app's
    precision there (docs/gpu.md): a float32 figure must not be claimed for a bfloat16 run.)"""
    candidates = [r for r in runs if r.get("status") == "ok" and r.get("fastest") and r.get("default_target")
                  and (dtype is None or r.get("dtype") == dtype)]
    if not candidates:
        return None
    run = max(candidates, key=lambda r: r["fastest"]["speedup"])
    return {**run["fastest"], "dtype": run["dtype"], "device": info.get("device"), "date": run.get("date"),
            "bench": run.get("out")}


def write_choice(choice: dict | None, path: Path = CHOICE_FILE) -> str | None:
    """Keep the choice for the app (nothing is written without one); returns the path as shown."""
    if choice is None:
        return None
    path.write_text(json.dumps(choice, indent=1) + "\n", encoding="utf-8")
    return display_path(path)


def read_choice(path: Path = CHOICE_FILE) -> dict | None:
    """The measured choice, or None when no GPU check has measured one (or the file is unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("drafter") not in DRAFTERS:
        return None
    if not isinstance(data.get("speedup"), (int, float)):
        return None
    return data
