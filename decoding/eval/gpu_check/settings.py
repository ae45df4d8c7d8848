"""What one gpu-check run is asked to do: the parts, where results go, the benchmark's small sizes.

Kept apart from `cli.py` so that every part module can read the settings without importing the
command line (no import circle)."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...paths import DOCS, REPO, SPEC_BENCH

# the running order: the GPU backend's figures first, so that a run cut short keeps them
PARTS = ("bench", "energy", "tests", "ppd")
COPY_ENV = "GPU_CHECK_COPY_TO"  # a folder the report, the choice and the compact results are copied to
DEFAULT_REPORT = DOCS / "gpu.md"
RUNS_DIR = REPO / "runs" / "gpu-check"  # bench outputs and the per-part results (git-ignored)


@dataclass(frozen=True)
class CheckSettings:
    """The settings every part reads; `budget_s` is the whole command's time (plan.py shares it out)."""

    device: str = "cuda"
    prompts: Path = SPEC_BENCH
    max_prompts: int = 48  # at most this many prompts, spread over the categories, for any benchmark row
    max_new_tokens: int = 64
    budget_s: float = 360.0
    tests_timeout_s: int = 360
    runs_dir: Path = RUNS_DIR
    copy_to: Path | None = None
    started: float = 0.0  # time.monotonic() when the command started (the budget's clock)
    parts: tuple = PARTS  # the parts this run runs, in order (the budget keeps time for the later ones)
    progress: object = None  # progress(part, result so far): a part's partial result, written as it grows
    jobs: tuple | None = None  # the bench part's jobs to run (plan.JOBS keys); None: all


def parse_parts(text: str) -> list[str]:
    """The parts named in `--part` (comma-separated, or "all"), in the order they run."""
    names = [p.strip().lower() for p in str(text).split(",") if p.strip()]
    if not names:
        raise UsageError(f"--part is empty: choose from {', '.join(PARTS)} or all")
    unknown = [n for n in names if n not in PARTS and n != "all"]
    if unknown:
        raise UsageError(f"unknown --part {unknown[0]!r}: choose from {', '.join(PARTS)} or all (comma-separated)")
    return list(PARTS) if "all" in names else [p for p in PARTS if p in names]


def settings_from_args(args) -> tuple[list[str], CheckSettings]:
    """Check the command line (UsageError on bad input) before anything touches a device."""
    parts = parse_parts(args.part)
    device = str(args.device).strip().lower()
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise UsageError(f"--device {args.device!r}: gpu-check measures a CUDA device (cuda or cuda:N)")
    if args.max_prompts < 1 or args.max_new_tokens < 1:
        raise UsageError("--max-prompts and --max-new-tokens must be >= 1")
    budget = getattr(args, "budget_s", CheckSettings.budget_s)
    if not budget > 0:
        raise UsageError(f"--budget-s {budget}: give the seconds the whole check may take (e.g. 360)")
    prompts = Path(args.prompts) if args.prompts else SPEC_BENCH
    if not prompts.is_file():
        raise UsageError(f"--prompts {args.prompts}: no such file")
    from .plan import JOBS

    jobs = None
    if getattr(args, "jobs", None):
        jobs = tuple(j.strip() for j in args.jobs.split(",") if j.strip())
        known = [j.key for j in JOBS]
        unknown = [j for j in jobs if j not in known]
        if unknown or not jobs:
            raise UsageError(f"--jobs {args.jobs!r}: choose from {', '.join(known)} (comma-separated)")
    copy_to = os.environ.get(COPY_ENV, "").strip()
    return parts, CheckSettings(device=device, prompts=prompts, max_prompts=args.max_prompts,
                                max_new_tokens=args.max_new_tokens, budget_s=float(budget),
                                copy_to=Path(copy_to).expanduser() if copy_to else None,
                                started=time.monotonic(), parts=tuple(parts), jobs=jobs)
