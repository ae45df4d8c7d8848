"""What one gpu-check run is asked to do: the parts, where results go, the benchmark's small sizes.

Kept apart from `cli.py` so that every part module can read the settings without importing the
command line (no import circle)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...paths import DEV_PROMPTS, DOCS, REPO

PARTS = ("tests", "bench", "energy", "ppd")
DEFAULT_REPORT = DOCS / "gpu.md"
RUNS_DIR = REPO / "runs" / "gpu-check"  # bench outputs and the per-part results (git-ignored)


@dataclass(frozen=True)
class CheckSettings:
    """The settings every part reads; the defaults keep the whole check well under 10 minutes."""

    device: str = "cuda"
    prompts: Path = DEV_PROMPTS
    max_prompts: int = 3  # dev prompts spread over the file (benchmark and energy runs)
    max_new_tokens: int = 32
    tests_timeout_s: int = 360
    runs_dir: Path = RUNS_DIR


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
    prompts = Path(args.prompts) if args.prompts else DEV_PROMPTS
    if not prompts.is_file():
        raise UsageError(f"--prompts {args.prompts}: no such file")
    return parts, CheckSettings(device=device, prompts=prompts, max_prompts=args.max_prompts,
                                max_new_tokens=args.max_new_tokens)
