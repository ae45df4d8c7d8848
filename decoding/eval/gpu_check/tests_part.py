"""The `tests` part: the suite's CUDA-marked tests (tests/decoding/test_cuda.py) in a pytest subprocess.

A subprocess, so pytest's own collection, fixtures and markers run as in `make test`; on a CUDA
machine a skipped test counts as a failure of this part (it should have run there)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from ...paths import REPO
from .settings import CheckSettings

CUDA_TESTS = "tests/decoding/test_cuda.py"
PYTEST_ARGS = ["-m", "pytest", "-q", "-rs", "-m", "cuda", CUDA_TESTS]
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)\b")


def summary_counts(output: str) -> dict[str, int]:
    """{"passed": 12, "skipped": 1, ...} from pytest's last summary line ({} when there is none)."""
    for line in reversed(output.splitlines()):
        found = _COUNT.findall(line)
        if found:
            counts: dict[str, int] = {}
            for n, what in found:
                key = {"error": "errors", "warning": "warnings"}.get(what, what)
                counts[key] = counts.get(key, 0) + int(n)
            return counts
    return {}


def verdict(returncode: int, counts: dict[str, int]) -> tuple[str, str | None]:
    """("ok", None) when every CUDA test ran and passed, else ("failed", why)."""
    if returncode == 0 and counts.get("passed", 0) > 0 and not counts.get("skipped") and not counts.get("errors"):
        return "ok", None
    if counts.get("failed") or counts.get("errors"):
        return "failed", f"{counts.get('failed', 0)} failed, {counts.get('errors', 0)} errors"
    if counts.get("skipped"):
        return "failed", f"{counts['skipped']} CUDA tests skipped on a CUDA machine"
    return "failed", f"pytest exited {returncode} without a passing test"


def run(settings: CheckSettings) -> dict:
    command = [sys.executable, *PYTEST_ARGS]
    shown = "python " + " ".join(PYTEST_ARGS)
    try:
        # the tests choose compiling themselves (one test compiles): the check's own SPECDEC_COMPILE is not theirs
        env = {k: v for k, v in os.environ.items() if k != "SPECDEC_COMPILE"}
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=settings.tests_timeout_s,
                              env=env)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "command": shown, "error": f"timed out after {settings.tests_timeout_s} s"}
    output = proc.stdout + proc.stderr
    counts = summary_counts(proc.stdout)
    status, why = verdict(proc.returncode, counts)
    result = {"status": status, "command": shown, "counts": counts,
              "problems": [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR", "SKIPPED"))][:20]}
    if why:
        result["error"] = why
        result["tail"] = "\n".join(output.strip().splitlines()[-25:])
    return result
