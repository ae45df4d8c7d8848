"""Where things live: one constant per path the repository ships (read by every command and test),
and the per-user cache outside it."""

import os
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO / "assets"
SHIPPED_DRAFT = ASSETS / "draft-smollm2-135m"  # the distilled draft of the default target
SHIPPED_FEATURE_DRAFT = ASSETS / "feature-draft-smollm2-135m"  # the feature (EAGLE) draft of the default target
SHIPPED_CORPUS = ASSETS / "corpus-smollm2-135m"  # the default target's own answers (corpus.py)
PPD_ASSETS = ASSETS / "ppd"  # trained PPD prompt tokens, one folder per target
EXAMPLES = ASSETS / "examples"  # example traces the app opens before any model loads
APP_CSS = ASSETS / "app.css"
GALLERY_TAGS = ASSETS / "gallery.json"  # the task gallery's measured tags (bench --gallery, record_races.py)
GPU_CHOICE = ASSETS / "gpu-choice.json"  # the drafter a GPU starts with (written by gpu-check)
BENCHMARKS = REPO / "benchmarks"
DEV_PROMPTS = BENCHMARKS / "dev.jsonl"  # the project's evaluation prompts
SPEC_BENCH = BENCHMARKS / "spec_bench.jsonl"  # the Spec-Bench subset (public benchmark)
DOCS = REPO / "docs"
BENCH_RUNS = DOCS / "bench"  # the committed benchmark runs the docs cite (and the app quotes)


def cache_dir() -> Path:
    """Per-user cache root (converted models, tuning, cached continuations): $SPECDEC_CACHE, else
    $XDG_CACHE_HOME/specdec-playground, else ~/.cache/specdec-playground. Not created here."""
    explicit = os.environ.get("SPECDEC_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specdec-playground"


def display_command(program: str, argv) -> str:
    """The command line `program argv...` as reports record it: an argument that is an absolute path (or
    `--flag=/path`) inside the repository is written relative to it (`display_path`), so a report made with
    `--out /abs/path/docs/bench/x` names no directory of the machine it ran on; an argument a shell would
    split or expand (`--draft-tree "4,2;6,3"`, a prompt with spaces) is quoted, so the line can be pasted back."""
    shown = []
    for arg in argv:
        flag, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        if value.startswith("/"):
            value = display_path(value)
        shown.append(f"{flag}{eq}{shlex.quote(value)}")
    return " ".join([program, *shown])


def display_path(path) -> str:
    """`path` as records, cards and reports write it: relative to the repository when inside it, so
    nothing the project writes names a directory of the machine it ran on; otherwise as given."""
    p = Path(path).expanduser()
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
