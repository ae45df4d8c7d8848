"""The `bench` part: the benchmark jobs of `plan.py` in the time budget, on the Spec-Bench subset.

Our decoding with the static cache and CUDA graphs (plain and every offline drafter at gamma 4 and
auto, half precision), the same in float32 for greedy equality, plain decoding with the dynamic
cache (the "before" figure), HF `generate()` in its fastest configuration and HF's eager peers; each
job its own benchmark run, so that its speedups are ratios within one run on the same prompts
(`jobs.py`). After each job `settings.progress` (when set) gets the part's result so far, so a run
cut short still leaves the report and the JSON of the jobs done. A job that raises is recorded as
failed and the next one runs; a job the budget has no room for is recorded as skipped.

The fastest drafter of the job in the precision the app loads in on this device goes to the result
("fastest"), for the GPU Space's default (`choice.py`)."""

from __future__ import annotations

import time
import traceback

from ...lm.models import DEFAULT_TARGET
from ...paths import display_path
from .choice import fastest_drafter
from .pairs import check_pairs
from .plan import ASSUMED_TPS, JOBS, floor_prompts, job_cost, plan_jobs, reserve_after
from .settings import PARTS, CheckSettings


def bench_deadline(settings: CheckSettings) -> float:
    """The monotonic time by which the bench part's jobs should be done (later parts' reserves kept)."""
    parts = list(settings.parts or PARTS)
    return settings.started + settings.budget_s - reserve_after(parts, "bench")


def run(settings: CheckSettings, jobs=JOBS, run_job=None, clock=time.monotonic, app_dtype: str | None = None) -> dict:
    from ...lm.prompt_files import read_prompt_rows
    from .jobs import Models, job_env, run_job as default_run_job
    from .pairs import app_dtype as device_app_dtype

    run_job = run_job or default_run_job
    if settings.jobs is not None:
        jobs = tuple(j for j in jobs if j.key in settings.jobs)
    app_dtype = app_dtype or device_app_dtype(settings.device)
    pairs, skipped = check_pairs()
    if not pairs:
        return {"status": "failed", "error": "no pair loaded on this device", "skipped": skipped}
    pair = pairs[0]
    rows = read_prompt_rows(settings.prompts)
    deadline = bench_deadline(settings)
    tps = dict(ASSUMED_TPS)  # the planning speeds: assumed, then each kind as its first probe measures it
    measured: dict[str, float] = {}
    categories = len({r.category for r in rows})
    plan = plan_jobs(jobs, deadline - clock(), settings.max_new_tokens, tps, len(rows), settings.max_prompts,
                     categories)
    result = {"status": "running", "pair": pair.label, "note": pair.note, "skipped": skipped,
              "budget_s": settings.budget_s, "bench_seconds_planned": round(deadline - clock(), 1),
              "assumed_tps": dict(ASSUMED_TPS), "plan": plan, "prompts_file": display_path(settings.prompts),
              "max_new_tokens": settings.max_new_tokens, "jobs": {}, "fastest": None}
    models = Models(pair, settings.device)
    for i, job in enumerate(jobs):
        left = deadline - clock()
        least = job_cost(job, floor_prompts(job, settings.max_prompts, len(rows), categories), settings.max_new_tokens,
                         tps)
        if i > 0 and left < 0.5 * least:
            row = {"key": job.key, "title": job.title, "status": "skipped", "env": job_env(job),
                   "why": f"the time budget was spent ({max(left, 0):.0f} s left of the benchmark's share; "
                          f"this job needs about {least:.0f} s at the least)"}
        else:
            try:
                row = run_job(jobs, i, settings, models, rows, deadline, tps, clock=clock)
            except Exception as exc:  # noqa: BLE001 - one broken job must not stop the others
                row = {"key": job.key, "title": job.title, "status": "failed", "env": job_env(job),
                       "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc(limit=6)}
        full = row.pop("_result", None)
        if full is not None and row.get("status") == "ok" and row.get("dtype") == app_dtype \
                and result.get("fastest") is None:
            fastest = fastest_drafter(full)
            if fastest:
                result["fastest"] = {**fastest, "dtype": row["dtype"], "job": job.key, "date": row.get("date"),
                                     "bench": row.get("out"), "default_target": pair.target == DEFAULT_TARGET}
        result["jobs"][job.key] = row
        measured.update({k: v for k, v in (row.get("probe_tps") or {}).items() if k not in measured})
        result["measured_tps"] = dict(measured)
        if settings.progress is not None:
            settings.progress("bench", dict(result))
    done = [r for r in result["jobs"].values() if r.get("status") == "ok"]
    result["status"] = "ok" if done else "failed"
    if not done:
        result["error"] = "no benchmark job finished"
    return result
