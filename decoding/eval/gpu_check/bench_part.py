"""The `bench` part: a short benchmark of the pairs that load here, in float32 and in half
precision, with the HF peers, run through the benchmark's own command line (`decoding.eval.bench`).

Each (pair, precision) is one `python -m decoding bench` run (a few dev prompts, 1 warm-up, 1
repeat, no memory subprocesses, gamma 4 and auto) writing under runs/gpu-check/bench/; docs/gpu.md
gets its table, and the fastest drafter of the default target goes to docs/gpu-choice.json."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re

from ...errors import UsageError
from ...paths import display_path
from ...lm.models import DEFAULT_TARGET
from .choice import fastest_drafter
from .pairs import Pair, check_pairs, half_dtype
from .settings import CheckSettings


def bench_argv(pair: Pair, dtype: str, settings: CheckSettings, out) -> list[str]:
    """The `bench` command line of one (pair, precision)."""
    return ["bench", "--prompts", str(settings.prompts), "--max-prompts", str(settings.max_prompts),
            "--max-new-tokens", str(settings.max_new_tokens), "--repeats", "1", "--warmup", "1", "--gamma", "4,auto",
            "--target", pair.target, "--draft", pair.draft, "--device", settings.device, "--dtype", dtype,
            "--no-memory", "--out", str(out)]


def bench_parser() -> argparse.ArgumentParser:
    """A parser holding only the benchmark's subcommand, exactly as `python -m decoding` defines it."""
    from ..bench import add_parser

    parser = argparse.ArgumentParser(prog="python -m decoding")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def bench_one(pair: Pair, dtype: str, settings: CheckSettings) -> dict:
    """One benchmark run; a pair that does not load is "skipped" with the loader's reason."""
    from ..bench import markdown_table, run_cli

    out = settings.runs_dir / "bench" / f"{_slug(pair.label.split(':')[0])}-{dtype}"
    row = {"pair": pair.label, "note": pair.note, "dtype": dtype, "out": display_path(out)}
    args = bench_parser().parse_args(bench_argv(pair, dtype, settings, out))
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the table is in docs/gpu.md; tqdm stays on stderr
            run_cli(args)
    except UsageError as exc:
        return {**row, "status": "skipped", "why": str(exc)}
    result = json.loads((out / "bench.json").read_text())
    return {**row, "status": "ok", "table": markdown_table(result), "models": result["models"],
            "fastest": fastest_drafter(result), "default_target": pair.target == DEFAULT_TARGET,
            "date": result.get("date"),
            "greedy_equal": result.get("greedy_equal_to_autoregressive"), "energy_note": result["energy"]["note"],
            "settings": {k: result["settings"][k] for k in ("prompts", "max_new_tokens", "repeats", "warmup", "gammas")}}


def run(settings: CheckSettings) -> dict:
    pairs, skipped = check_pairs()
    runs = [bench_one(pair, dtype, settings) for pair in pairs for dtype in ("float32", half_dtype())]
    skipped += [{"what": f"{r['pair']} in {r['dtype']}", "why": r["why"]} for r in runs if r["status"] == "skipped"]
    measured = [r for r in runs if r["status"] == "ok"]
    return {"status": "ok" if measured else "failed", "runs": measured, "skipped": skipped,
            **({} if measured else {"error": "no pair loaded on this device"})}
