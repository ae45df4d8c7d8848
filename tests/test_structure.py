"""The shape of the repository: no file over ~500 lines in `decoding/` and `app/`, and nothing that points
out of it. (The engine's import circles and layers: tests/decoding/test_layers.py.)"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
LONG_FILES: dict[str, str] = {}  # repo-relative path -> why it may be longer


def test_files_have_one_job_and_stay_short():
    long = {}
    for pkg in ("decoding", "app"):
        for path in (ROOT / pkg).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES and rel not in LONG_FILES:
                long[rel] = n
    assert long == {}


# Paths of a machine: the checkout's own parent folder (the shared texts sit beside the checkout;
# at the file-system root the checkout itself) and the usual home folders of any machine.
MACHINE_PATH = ROOT.parent if ROOT.parent != ROOT.parent.parent else ROOT
POINTERS = re.compile(r"shared/|issue [0-9]|\b00[0-4]_|DESIGN\.md|/(home|root|Users|mnt)/|"
                      + re.escape(f"{MACHINE_PATH}/"))
SCANNED = ("decoding", "app", "training", "docs", "assets", "benchmarks", "scripts", "experiments", "README.md",
           "Makefile")


@pytest.mark.parametrize("top", SCANNED)
def test_nothing_points_out_of_the_repository(top):
    base = ROOT / top
    files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
    found = []
    for path in files:
        if path.suffix in (".pt", ".safetensors", ".png") or path.stat().st_size > 5_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if POINTERS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert found == []
