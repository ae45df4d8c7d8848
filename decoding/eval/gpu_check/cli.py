"""`python -m decoding gpu-check [--part bench,energy,tests,ppd] [--budget-s S]`: check the arguments,
stop in one line where there is no GPU, otherwise run the parts in the time budget and write
docs/gpu.md, the results JSON and the GPU Space's choice (`publish.py`) after each part and each
benchmark job (`$GPU_CHECK_COPY_TO` gets copies).

A part that raises does not stop the others: it is recorded as failed with its error, and the
command exits 1 once the report is written (0 when every part ran; a meter without energy readings
is a finding, not a failure, and so is a part the budget had no room for).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from pathlib import Path

from .pairs import app_dtype
from .plan import MIN_TESTS_TIMEOUT_S, PART_NEEDS_S, reserve_after
from .settings import COPY_ENV, DEFAULT_REPORT, PARTS, CheckSettings, settings_from_args


def add_parser(sub) -> None:
    g = sub.add_parser("gpu-check", help="check and measure the GPU path (Spec-Bench benchmark per backend with the "
                       "HF peers, NVML energy, CUDA tests, PPD tune) in a time budget and write docs/gpu.md; one line "
                       "and exit 0 without a GPU")
    g.add_argument("--part", default="all",
                   help=f"comma-separated: {', '.join(PARTS)}, or all (default; in this order)")
    g.add_argument("--device", default="cuda", help="cuda or cuda:N (the tests part runs on the default CUDA device)")
    g.add_argument("--out", default=None, help="the report (default: docs/gpu.md)")
    g.add_argument("--prompts", default=None, help="prompt file (default: benchmarks/spec_bench.jsonl)")
    g.add_argument("--max-prompts", type=int, default=CheckSettings.max_prompts,
                   help="at most this many prompts, spread over the categories, for any benchmark job (the budget "
                        "may give a job fewer: the report says how many each used)")
    g.add_argument("--max-new-tokens", type=int, default=CheckSettings.max_new_tokens)
    g.add_argument("--jobs", default=None,
                   help="the bench part's jobs, comma-separated (default: all, in this order): half-static, "
                        "float32-static, half-dynamic, half-hf-compiled, half-hf-eager")
    g.add_argument("--budget-s", type=float, default=CheckSettings.budget_s,
                   help="seconds the whole check should take: the benchmark jobs get as many prompts as fit, the "
                        f"PPD tune runs only if time is left; {COPY_ENV}=<dir> copies the report, the choice and "
                        "the results JSON there after each step")


def no_gpu_line() -> str | None:
    """The one line printed where CUDA is absent; None where it is present."""
    import torch

    if torch.cuda.is_available():
        return None
    build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", built without CUDA")
    return f"gpu-check: no GPU present ({build}; torch.cuda.is_available() is False): nothing measured, nothing written"


def _runner(part: str):
    if part == "tests":
        from .tests_part import run
    elif part == "bench":
        from .bench_part import run
    elif part == "energy":
        from .energy_part import run
    else:
        from .ppd_part import run
    return run


def part_settings(part: str, settings: CheckSettings, clock=time.monotonic) -> tuple[CheckSettings, str | None]:
    """The settings a part runs with in the time left (the tests' timeout: the time left less the
    later parts' reserves, at least MIN_TESTS_TIMEOUT_S), or why the budget has no room for it."""
    parts = list(settings.parts or PARTS)
    left = settings.started + settings.budget_s - clock() if settings.started else settings.budget_s
    need = PART_NEEDS_S.get(part)
    if need is not None and left < need:
        return settings, (f"the time budget (--budget-s {settings.budget_s:.0f}) had {max(left, 0):.0f} s left; "
                          f"this part takes about {need:.0f} s")
    if part == "tests":
        timeout = max(MIN_TESTS_TIMEOUT_S, int(left - reserve_after(parts, part)))
        return dataclasses.replace(settings, tests_timeout_s=min(settings.tests_timeout_s, timeout)), None
    return settings, None


def run_parts(parts: list[str], settings: CheckSettings, runner=_runner, log=print, on_result=None) -> dict[str, dict]:
    """Each part's result dict (with "status" and "seconds"); an exception becomes status "failed",
    a part the budget has no room for "skipped". `on_result(results)` after each part."""
    results = {}
    for part in parts:
        log(f"gpu-check: {part} ...")
        t0 = time.monotonic()
        try:
            these, why = part_settings(part, settings)
            result = {"status": "skipped", "why": why} if why else runner(part)(these)
        except Exception as exc:  # noqa: BLE001 - one broken part must not hide the others
            result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=8)}
        result["seconds"] = round(time.monotonic() - t0, 1)
        results[part] = result
        log(f"gpu-check: {part} {result['status']} ({result['seconds']} s)")
        if on_result is not None:
            on_result(results)
    return results


def run_cli(args) -> int:
    parts, settings = settings_from_args(args)
    line = no_gpu_line()
    if line is not None:
        print(line)
        return 0
    from .device import device_info

    info = device_info(settings.device)
    return run_check(parts, settings, info, Path(args.out) if args.out else DEFAULT_REPORT)


def run_check(parts: list[str], settings: CheckSettings, info: dict, report: Path, runner=_runner,
              choice_file: Path | None = None) -> int:
    """Run the parts and write everything after each part and each benchmark job (`publish.py`);
    the exit status (1 when a part failed)."""
    from .publish import publish

    dtype = app_dtype(settings.device)
    print(f"gpu-check on {info['device']} (driver {info['driver']}, CUDA {info['cuda']}, torch {info['torch']}): "
          f"{', '.join(parts)} in a budget of {settings.budget_s:.0f} s"
          + (f"; copies to {settings.copy_to}" if settings.copy_to else ""))
    done: dict = {}

    def write(results: dict) -> dict:
        try:
            return publish(info, results, report, settings.runs_dir, dtype, settings.copy_to,
                           **({"choice_file": choice_file} if choice_file is not None else {}))
        except Exception as exc:  # noqa: BLE001 - a failed write must not stop the measuring
            print(f"gpu-check: could not write the results: {type(exc).__name__}: {exc}")
            return {}

    def progress(part: str, partial: dict) -> None:
        partial = {**partial, "seconds": round(time.monotonic() - settings.started, 1)}
        write({**done, part: partial})
        jobs = partial.get("jobs") or {}
        if jobs:
            key, last = list(jobs.items())[-1]
            elapsed = time.monotonic() - settings.started
            print(f"gpu-check: bench job {key} {last.get('status')} ({last.get('prompts', 0)} prompts, "
                  f"{last.get('seconds', 0)} s; {elapsed:.0f} s of {settings.budget_s:.0f})")

    def part_done(results: dict) -> None:
        done.update(results)
        write(results)

    settings = dataclasses.replace(settings, progress=progress)
    results = run_parts(parts, settings, runner, on_result=part_done)
    written = write(results)
    print(f"gpu-check: wrote {written.get('report')}, {written.get('json')}"
          + (f", {written['choice']} (the drafter a GPU Space starts with)" if written.get("choice") else "")
          + (f"; copied to {settings.copy_to}" if written.get("copied") else "")
          + f" ({time.monotonic() - settings.started:.0f} s)")
    return 1 if any(r["status"] == "failed" for r in results.values()) else 0
