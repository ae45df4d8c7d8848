"""What the project measured, read from the committed benchmark results (never typed by hand).

`docs/bench/` holds the JSON of the benchmark runs the docs report; the app quotes them (the
greedy-equality rate in bfloat16, the task gallery's tags) instead of copying numbers into text.
"""

from __future__ import annotations

import json
from functools import lru_cache

from decoding.paths import BENCH_RUNS as BENCH_DIR


@lru_cache(maxsize=None)
def bench_result(name: str) -> dict | None:
    """The committed result `docs/bench/<name>/bench.json`, or None when it is absent or unreadable."""
    try:
        return json.loads((BENCH_DIR / name / "bench.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def greedy_equal_rate(dtype: str) -> str | None:
    """"k/n": on how many Spec-Bench prompts greedy speculative text (the first speculative variant)
    equalled greedy autoregressive text, in the benchmark run of that precision; None if not run."""
    result = bench_result(f"spec-bench-{dtype}")
    equal = (result or {}).get("greedy_equal_to_autoregressive") or {}
    key = next((k for k in equal if k.startswith("speculative")), None)
    return equal.get(key) if key else None
