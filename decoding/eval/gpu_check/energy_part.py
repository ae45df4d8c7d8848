"""The `energy` part: NVML joules per generated token, over windows of at least two seconds.

Plain decoding against the fastest speculative variant the bench part measured in the app's
precision (its drafter and gamma, from the merged results; the hybrid with the feature draft at
gamma 4 before any benchmark ran), both with the static cache and CUDA graphs (`jobs.backend_env`).
NVML's counters update about every 100 ms, so one short run says nothing: each method decodes the
prompts in turn until the window lasts WINDOW_SECONDS (twice `MIN_WINDOW_SECONDS`), and
`energy_per_token` refuses anything shorter than the minimum. The idle power is measured first, so
the per-token figure is also given above idle. Where the device exposes no energy, the meter's
reason is the result (status "unavailable")."""

from __future__ import annotations

import time

import json

from ...lm.models import DEFAULT_TARGET
from ..energy import MIN_WINDOW_SECONDS, energy_per_token, make_meter
from .pairs import check_pairs
from .jobs import backend_env
from .plan import Job
from .settings import CheckSettings

WINDOW_SECONDS = 2 * MIN_WINDOW_SECONDS
METHODS = ("autoregressive", "speculative")
SPECS = {"hybrid-feature": "hybrid:feature", "distilled": "distilled"}  # bench label -> drafter spec (else the same)
STATIC = Job("energy", "energy", "half", "static", True)  # the backend the energy is measured on


def speculative_choice(pair, runs_dir) -> tuple[str, object]:
    """(drafter spec, gamma: a number or "auto") for the speculative side: the bench part's fastest
    drafter where the merged results hold one for this pair, else the hybrid with the feature draft
    (the default target) or the pair's first drafter, at gamma 4."""
    try:
        fastest = json.loads((runs_dir / "results.json").read_text())["parts"]["bench"]["fastest"]
    except (OSError, ValueError, KeyError, TypeError):
        fastest = None
    if fastest and fastest.get("default_target") == (pair.target == DEFAULT_TARGET) and fastest.get("drafter"):
        return SPECS.get(fastest["drafter"], fastest["drafter"]), fastest.get("gamma") or 4
    if pair.target == DEFAULT_TARGET:
        return "hybrid:feature", 4
    return pair.draft.split(",")[0], 4


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
    pairs, _ = check_pairs()
    if not pairs:
        return {"status": "failed", "error": "no pair to decode with"}
    meter = make_meter(settings.device)
    if not meter.available:
        return {"status": "unavailable", "reason": meter.note}
    pair = pairs[0]
    drafter, gamma = speculative_choice(pair, settings.runs_dir)
    try:
        with backend_env(STATIC) as env:
            return _measure(settings, pair, drafter, gamma, meter, env)
    finally:
        meter.close()


def _measure(settings: CheckSettings, pair, drafter: str, gamma, meter, env: dict) -> dict:
    from ..bench.cli import spread
    from ...paths import SHIPPED_DRAFT
    from ...run.pair import load_pair
    from ...lm.prompt_files import read_prompt_rows
    from ...run.runner import decode
    from ...methods.base import RunConfig
    from ...rules.warp import SamplingConfig

    target, draft = load_pair(pair.target, str(SHIPPED_DRAFT) if drafter == "distilled" else drafter,
                              device=settings.device)
    rows = read_prompt_rows(settings.prompts)
    prompts = [target.encode_prompt(r.prompt, True) for r in spread(rows, min(settings.max_prompts, len(rows)))]
    idle = meter.idle_power_watts(1.0) if hasattr(meter, "idle_power_watts") else None
    result = {"status": "ok", "pair": pair.label, "drafter": drafter, "gamma": gamma,
              "dtype": str(target.dtype).removeprefix("torch."), "backend": env,
              "meter": meter.note, "idle_watts": idle, "window_seconds": WINDOW_SECONDS, "methods": {}}
    for method in METHODS:
        config = RunConfig(method=method, max_new_tokens=settings.max_new_tokens,
                           sampling=SamplingConfig(temperature=0.0), gamma=gamma if isinstance(gamma, int) else 4,
                           stop_at_eos=False, lean=True,
                           extra={} if isinstance(gamma, int) else {"gamma_schedule": gamma})
        turn = iter(range(10**9))

        def run_once() -> int:
            ids = prompts[next(turn) % len(prompts)]
            return sum(len(r.emitted) for r in decode(target, draft, ids, config))

        run_once()  # warm-up, outside the window
        row = measure_window(run_once, meter)
        row["above_idle_joules_per_token"] = above_idle(row, idle)
        result["methods"][method] = row
    return result
