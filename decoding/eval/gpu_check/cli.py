"""`python -m decoding gpu-check [--part tests,bench,energy,ppd]`: check the arguments, stop in one
line where there is no GPU, otherwise run the parts and write docs/gpu.md.

A part that raises does not stop the others: it is recorded as failed with its error, and the
command exits 1 once the report is written (0 when every part ran; a meter without energy readings
is a finding, not a failure).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from .settings import DEFAULT_REPORT, PARTS, CheckSettings, settings_from_args


def add_parser(sub) -> None:
    g = sub.add_parser("gpu-check", help="check and measure the GPU path (CUDA tests, short benchmark, NVML "
                       "energy, PPD tune) and write docs/gpu.md; one line and exit 0 without a GPU")
    g.add_argument("--part", default="all", help=f"comma-separated: {', '.join(PARTS)}, or all (default)")
    g.add_argument("--device", default="cuda", help="cuda or cuda:N (the tests part runs on the default CUDA device)")
    g.add_argument("--out", default=None, help="the report (default: docs/gpu.md)")
    g.add_argument("--prompts", default=None, help="prompt file (default: benchmarks/dev.jsonl)")
    g.add_argument("--max-prompts", type=int, default=CheckSettings.max_prompts,
                   help="prompts spread over the file for the benchmark and energy runs")
    g.add_argument("--max-new-tokens", type=int, default=CheckSettings.max_new_tokens)


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


def run_parts(parts: list[str], settings: CheckSettings, runner=_runner, log=print) -> dict[str, dict]:
    """Each part's result dict (with "status" and "seconds"); an exception becomes status "failed"."""
    results = {}
    for part in parts:
        log(f"gpu-check: {part} ...")
        t0 = time.monotonic()
        try:
            result = runner(part)(settings)
        except Exception as exc:  # noqa: BLE001 - one broken part must not hide the others
            result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=8)}
        result["seconds"] = round(time.monotonic() - t0, 1)
        results[part] = result
        log(f"gpu-check: {part} {result['status']} ({result['seconds']} s)")
    return results


def app_dtype(device: str) -> str:
    """The precision the app loads the default pair in on this device (the choice is made in it)."""
    import torch

    from ...lm.devices import default_dtype, dtype_name

    return dtype_name(default_dtype(torch.device(device)))


def run_cli(args) -> int:
    parts, settings = settings_from_args(args)
    line = no_gpu_line()
    if line is not None:
        print(line)
        return 0
    from .device import device_info
    from .choice import choice_from_runs, write_choice
    from .report import write_report

    info = device_info(settings.device)
    print(f"gpu-check on {info['device']} (driver {info['driver']}, CUDA {info['cuda']}, torch {info['torch']}): "
          + ", ".join(parts))
    results = run_parts(parts, settings)
    path = write_report(info, results, Path(args.out) if args.out else DEFAULT_REPORT, settings.runs_dir)
    print(f"gpu-check: wrote {path}")
    bench = results.get("bench") or {}
    chosen = write_choice(choice_from_runs(info, bench.get("runs") or [], app_dtype(settings.device)))
    if chosen:
        print(f"gpu-check: wrote {chosen} (the drafter a GPU Space starts with)")
    return 1 if any(r["status"] == "failed" for r in results.values()) else 0
