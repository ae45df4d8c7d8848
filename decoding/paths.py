"""Where the repository keeps what it ships: one constant per path, read by every command and test."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO / "assets"
SHIPPED_DRAFT = ASSETS / "draft-smollm2-135m"  # the distilled draft of the default target
PPD_ASSETS = ASSETS / "ppd"  # trained PPD prompt tokens, one folder per target
EXAMPLES = ASSETS / "examples"  # example traces the app opens before any model loads
APP_CSS = ASSETS / "app.css"
BENCHMARKS = REPO / "benchmarks"
DEV_PROMPTS = BENCHMARKS / "dev.jsonl"  # the project's evaluation prompts
SPEC_BENCH = BENCHMARKS / "spec_bench.jsonl"  # the Spec-Bench subset (public benchmark)
DOCS = REPO / "docs"
