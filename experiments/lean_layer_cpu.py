"""What the static path's lean decoder layer costs on the CPU: a one-token step and a 5-token verify pass of the
default target, on HF's dynamic path against the static path with HF's modules, with the lean layer, and with
the lean layer compiled.

Variants (all on the same loaded model, switched by the env switches the engine reads at every pass):

- dynamic: `CachedLM` (HF's modules on a DynamicCache; today's CPU default, `--backend dynamic`);
- static: `StaticLM` with SPECDEC_LEAN_LAYER=0 (HF's modules with the short-pass kernels, `static_kernels.py`);
- static+lean: `StaticLM` with the lean layer (`decoding/lm/lean_layer.py`);
- static+lean+compile: the same with SPECDEC_COMPILE=1 (one inductor-compiled `layer_step` shared by all 30
  layers); its first passes, which compile, are timed apart and the dynamo graphs counted.

Each LM is prefilled with the chat prompt plus 64 greedy tokens (about 100 tokens); a timed pass then feeds
the next token (step) or it and 4 more (verify) and is rolled back, so every repetition sees the same cache.
The variants alternate within each repetition, so machine noise falls on all of them alike; the figures are
medians. Logits of each variant's step are compared with the dynamic path's (max |difference|).

    PYTHONPATH=. .venv/bin/python experiments/lean_layer_cpu.py [--threads 1] [--repeats 40]
        [--dtypes bfloat16,float32] [--out docs/bench/lean-layer-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Explain in two sentences why the sky is blue."
VARIANTS = ("dynamic", "static", "static+lean", "static+lean+compile")
DRAFTS = [42, 1337, 7, 99]  # the verify pass's four extra tokens


def _switch(variant: str) -> None:
    """The env switches of `variant` (the engine reads them at every pass)."""
    os.environ["SPECDEC_LEAN_LAYER"] = "1" if "lean" in variant else "0"
    os.environ["SPECDEC_COMPILE"] = "1" if "compile" in variant else "0"


def _timed(lm, tokens: list[int], length: int) -> tuple[float, object]:
    """Seconds of one forward of `tokens` at cache length `length`, then the cache rolled back to it."""
    started = time.perf_counter()
    logits = lm.forward(tokens)
    seconds = time.perf_counter() - started
    lm.rollback(length)
    return seconds, logits


def measure(dtype: str, repeats: int) -> dict:
    import torch
    from torch._dynamo.utils import counters

    from decoding.lm.cached_lm import CachedLM
    from decoding.lm.static_lm import StaticLM
    from decoding.run.pair import load_pair

    target, _ = load_pair("default", need_draft=False, dtype=dtype)
    ids = target.encode_prompt(PROMPT, chat=True)
    _switch("dynamic")
    lm = CachedLM(target.model, target.device, target.vocab_size)
    logits = lm.forward(ids)
    context = list(ids)
    for _ in range(64):
        context.append(int(logits[-1].argmax()))
        logits = lm.forward(context[-1:])
    length = len(context) - 1  # the cache holds all but the last token, which each timed pass feeds
    lms = {}
    for variant in VARIANTS:
        _switch(variant)
        if variant == "dynamic":
            lms[variant] = CachedLM(target.model, target.device, target.vocab_size)
        else:
            lms[variant] = StaticLM(target.model, target.device, target.vocab_size, capacity=len(context) + 128)
        lms[variant].forward(context[:-1])
    out = {"dtype": dtype, "context_tokens": length, "capacity": lms["static"].capacity, "repeats": repeats}
    # the compiled variant's first passes compile layer_step (once for n = 1, once for n > 1)
    _switch("static+lean+compile")
    counters.clear()
    first = {}
    for name, tokens in (("step", context[-1:]), ("verify", context[-1:] + DRAFTS)):
        first[name] = round(_timed(lms["static+lean+compile"], tokens, length)[0], 2)
    from decoding.lm import compiled_body

    out["compile"] = {"first_pass_s": first, "unique_graphs": counters["stats"]["unique_graphs"],
                      "failure": compiled_body.failure()}
    times = {(v, p): [] for v in VARIANTS for p in ("step", "verify")}
    diffs = {v: 0.0 for v in VARIANTS}
    for r in range(repeats):
        order = VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]
        steps = {}
        for variant in order:
            _switch(variant)
            seconds, steps[variant] = _timed(lms[variant], context[-1:], length)
            times[variant, "step"].append(seconds)
            times[variant, "verify"].append(_timed(lms[variant], context[-1:] + DRAFTS, length)[0])
        for variant in VARIANTS:
            diffs[variant] = max(diffs[variant], float((steps[variant] - steps["dynamic"]).abs().max()))
    out["graphs_after"] = counters["stats"]["unique_graphs"]
    out["median_ms"] = {v: {p: round(1000 * statistics.median(times[v, p]), 2) for p in ("step", "verify")}
                        for v in VARIANTS}
    out["step_logits_max_abs_diff_vs_dynamic"] = {v: diffs[v] for v in VARIANTS}
    del lms, target
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if args.threads < 1 or args.repeats < 1 or not dtypes or any(d not in ("bfloat16", "float32") for d in dtypes):
        print("error: --threads and --repeats must be >= 1; --dtypes takes bfloat16 and/or float32", file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.driver import machine_info

    torch.set_num_threads(args.threads)
    results = {"machine": machine_info(), "threads": args.threads, "runs": []}
    for dtype in dtypes:
        run = measure(dtype, args.repeats)
        results["runs"].append(run)
        print(f"{dtype}: context {run['context_tokens']} tokens, static capacity {run['capacity']}, "
              f"{run['repeats']} repeats (medians, ms)")
        for variant, ms in run["median_ms"].items():
            print(f"  {variant:22s} step {ms['step']:8.2f}  verify(5) {ms['verify']:8.2f}  "
                  f"|logits - dynamic| {run['step_logits_max_abs_diff_vs_dynamic'][variant]:.2e}")
        print(f"  compile: first passes {run['compile']['first_pass_s']} s, dynamo graphs "
              f"{run['compile']['unique_graphs']} (after all repeats {run['graphs_after']}), "
              f"failure {run['compile']['failure']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
