"""What the project measured, read from the committed benchmark results (never typed by hand).

`docs/bench/` holds the JSON of the benchmark runs the docs report; the app quotes them (the
greedy-equality rate in bfloat16, the task gallery's tags, what a verify pass costs) instead of copying
numbers into text.
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


VERIFY_COST = {200: "verify-cost.json", 1000: "verify-cost-long.json"}  # cached tokens -> result file


@lru_cache(maxsize=None)
def _verify_cost(name: str) -> dict | None:
    try:
        return json.loads((BENCH_DIR / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def pass_cost(tokens: int, dtype: str = "bfloat16", context: int = 200) -> float:
    """What one target pass over `tokens` new tokens cost relative to a one-token step, as measured by
    `decoding verify-cost` (docs/bench/verify-cost*.json) on a cache of `context` tokens; ValueError where
    that was not measured."""
    if context not in VERIFY_COST:
        raise ValueError(f"verify costs were measured on caches of {', '.join(map(str, VERIFY_COST))} tokens")
    result = _verify_cost(VERIFY_COST[context])
    rows = ((result or {}).get("rows") or {}).get(dtype) or {}
    ratio = (rows.get("relative") or {}).get(str(int(tokens)))
    if ratio is None:
        raise ValueError(f"no measured {dtype} pass over {tokens} tokens on a cache of {context} "
                         f"(measured: {', '.join(sorted((rows.get('relative') or {}), key=int)) or 'none'})")
    return float(ratio)


def speedup(run: str, variant: str) -> float:
    """A variant's speedup over plain decoding in the committed benchmark run `run` (its bench.json);
    ValueError where that run or variant is absent."""
    value = ((bench_result(run) or {}).get("speedup") or {}).get(variant)
    if value is None:
        raise ValueError(f"the benchmark run {run!r} has no speedup for {variant!r}")
    return float(value)
