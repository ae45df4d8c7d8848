"""The `energy` part: NVML joules per generated token, over windows of at least one second.

NVML's counters update about every 100 ms, so one short run says nothing: each method decodes the
dev prompts in turn until the window lasts WINDOW_SECONDS (at least `MIN_WINDOW_SECONDS`), and
`energy_per_token` refuses anything shorter. The idle power is measured first, so the per-token
figure is also given above idle. Where the device exposes no energy, the meter's reason is the
result (status "unavailable")."""

from __future__ import annotations

import time

from ..energy import MIN_WINDOW_SECONDS, energy_per_token, make_meter
from .pairs import check_pairs
from .settings import CheckSettings

WINDOW_SECONDS = 2 * MIN_WINDOW_SECONDS
METHODS = ("autoregressive", "speculative")


def measure_window(run_once, meter, min_seconds: float = WINDOW_SECONDS, clock=time.monotonic) -> dict:
    """Call `run_once()` (returns the tokens it generated) until the window lasts `min_seconds`;
    the meter's joules over the window and joules per token (None where the meter has none)."""
    meter.begin()
    t0 = clock()
    tokens = runs = 0
    while runs == 0 or clock() - t0 < min_seconds:
        tokens += run_once()
        runs += 1
    reading = meter.read()
    return {"tokens": tokens, "runs": runs, "seconds": reading.seconds, "joules": reading.joules,
            "joules_per_token": energy_per_token(reading.joules, tokens, reading.seconds), "note": reading.note}


def above_idle(row: dict, idle_watts: float | None) -> float | None:
    """(window joules - idle watts x window seconds) / tokens; None without both figures."""
    if idle_watts is None or row["joules_per_token"] is None:
        return None
    return (row["joules"] - idle_watts * row["seconds"]) / row["tokens"]


def run(settings: CheckSettings) -> dict:
    from ..bench.cli import spread
    from ...run.pair import load_pair
    from ...lm.prompt_files import read_prompt_rows
    from ...run.runner import decode
    from ...methods.base import RunConfig
    from ...rules.warp import SamplingConfig

    pairs, _ = check_pairs()
    if not pairs:
        return {"status": "failed", "error": "no pair to decode with"}
    meter = make_meter(settings.device)
    if not meter.available:
        return {"status": "unavailable", "reason": meter.note}
    pair = pairs[0]
    drafter = pair.draft.split(",")[0]  # a pair may name several drafters (the bench compares them): the first
    try:
        target, draft = load_pair(pair.target, drafter, device=settings.device)
        rows = read_prompt_rows(settings.prompts)
        prompts = [target.encode_prompt(r.prompt, True) for r in spread(rows, min(settings.max_prompts, len(rows)))]
        idle = meter.idle_power_watts(1.0) if hasattr(meter, "idle_power_watts") else None
        result = {"status": "ok", "pair": pair.label, "drafter": drafter, "dtype": str(target.dtype).removeprefix("torch."),
                  "meter": meter.note, "idle_watts": idle, "window_seconds": WINDOW_SECONDS, "methods": {}}
        for method in METHODS:
            config = RunConfig(method=method, max_new_tokens=settings.max_new_tokens,
                               sampling=SamplingConfig(temperature=0.0), gamma=4, stop_at_eos=False, lean=True)
            turn = iter(range(10**9))

            def run_once() -> int:
                ids = prompts[next(turn) % len(prompts)]
                return sum(len(r.emitted) for r in decode(target, draft, ids, config))

            run_once()  # warm-up, outside the window
            row = measure_window(run_once, meter)
            row["above_idle_joules_per_token"] = above_idle(row, idle)
            result["methods"][method] = row
        return result
    finally:
        meter.close()
