"""`python -m decoding verify-cost`: what one target pass over k new tokens costs, relative to one token.

Speculative decoding pays only where verifying gamma + 1 tokens costs about one step (Leviathan et
al.'s assumption). This measures it per precision: a cache of `--context` tokens, then passes of k
new tokens, each rolled back; the sizes are timed round-robin (every round times each size once,
the starting size rotating) so a noisy stretch of a shared machine hits every size alike; the
median per size, over `--reps` rounds after two warm-up rounds.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

DEFAULT_SIZES = "1,2,3,5,9,17,33"


def add_parser(sub) -> None:
    v = sub.add_parser("verify-cost", help="time one target pass over k new tokens, relative to one token, per precision")
    v.add_argument("--target", default="default")
    v.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated precisions to measure")
    v.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated k (new tokens per pass); 1 is the base")
    v.add_argument("--context", type=int, default=200, help="cached tokens before each pass")
    v.add_argument("--reps", type=int, default=10)
    v.add_argument("--threads", type=int, default=None)
    v.add_argument("--device", default=None)
    v.add_argument("--json", action="store_true")


def measure(target, sizes: list[int], context: int, reps: int) -> dict[int, float]:
    """Median seconds of one pass over k new tokens after `context` cached tokens, per k."""
    import torch

    from ...lm.backend import make_lm
    from ...lm.cached_lm import CachedLM
    from ...lm.devices import sync

    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size, capacity=context + max(sizes))
    ids = [int(target.tokenizer.eos_token_id or 0)] * (context + max(sizes))
    lm.forward(ids[:context])
    times: dict[int, list[float]] = {k: [] for k in sizes}
    with torch.inference_mode():
        for rep in range(reps + 2):
            start = rep % len(sizes)
            for k in sizes[start:] + sizes[:start]:
                sync(target.device)
                t0 = time.perf_counter()
                lm.forward(ids[context: context + k])
                sync(target.device)
                if rep >= 2:
                    times[k].append(time.perf_counter() - t0)
                lm.rollback(context)
    return {k: statistics.median(v) for k, v in times.items()}


def run_cli(args) -> int:
    import torch

    from ...lm.devices import dtype_name
    from ...errors import UsageError
    from ...lm.models import ModelLoadError, load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        raise UsageError(f"--sizes takes whole numbers (got {args.sizes!r})") from None
    if not sizes or sizes[0] < 1 or 1 not in sizes:
        raise UsageError("--sizes must include 1 (the base) and only sizes >= 1")
    rows = {}
    for dtype in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
        try:
            target = load_model(args.target, device=args.device, dtype=dtype)
        except ModelLoadError as exc:
            raise UsageError(str(exc)) from None
        seconds = measure(target, sizes, args.context, args.reps)
        rows[dtype_name(target.dtype)] = {"ms": {k: 1000 * s for k, s in seconds.items()},
                                          "relative": {k: s / seconds[1] for k, s in seconds.items()}}
    out = {"target": args.target, "device": str(target.device), "threads": torch.get_num_threads(),
           "context": args.context, "reps": args.reps, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "rows": rows}
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    print(f"target {args.target} on {out['device']}, {out['threads']} threads, {args.context} cached tokens, "
          f"median of {args.reps} passes after 2 warm-ups")
    print("| k | " + " | ".join(str(k) for k in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row['relative'][k]:.2f}x" for k in sizes) + " |")
    for name, row in rows.items():
        print(f"{name}: one token {row['ms'][1]:.1f} ms")
    return 0
