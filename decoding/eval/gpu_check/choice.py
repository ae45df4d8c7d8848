"""The drafter a GPU Space should start with, chosen from what the GPU check's benchmark measured.

The bench part measures the default target with every offline drafter (the distilled draft, the
feature draft, the hybrid of lookup and the feature draft, prompt lookup) at a fixed and at the
automatic gamma. `fastest_drafter` picks the speculative variant with the highest measured speedup
over our autoregressive decoding in the same run; `choice_from_bench` takes it from the job in the
precision the app loads in on this GPU; `write_choice` keeps it, with the device and precision, in
assets/gpu-choice.json, which the app's presets read on a GPU (app/presets.py). Without that file the
app makes no GPU claim.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...paths import GPU_CHOICE, display_path

CHOICE_FILE = GPU_CHOICE  # assets/gpu-choice.json: the app ships it (app/presets.py reads it through read_choice)
# the offline drafters a preset can name, as the benchmark labels them ("hybrid-feature": lookup + the feature draft)
DRAFTERS = ("distilled", "feature", "hybrid", "hybrid-feature", "prompt-lookup")


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


def choice_from_bench(info: dict, bench: dict, dtype: str) -> dict | None:
    """The choice from the bench part's "fastest" (see bench_part.py): only for the default target,
    only in `dtype`, the precision the app loads in on this GPU."""
    fastest = (bench or {}).get("fastest")
    if not fastest or not fastest.get("default_target") or fastest.get("dtype") != dtype:
        return None
    keep = ("drafter", "gamma", "speedup", "alpha", "c", "tokens_per_call", "dtype", "date", "bench", "job")
    return {**{k: fastest.get(k) for k in keep}, "device": info.get("device")}


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
