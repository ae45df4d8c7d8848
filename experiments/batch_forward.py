"""What one forward pass over several runs' tokens costs against the same runs one after another.

Loads the offline default target in the machine's fast precision, fills B KV caches with prompts of
different lengths, and times B runs' one-token steps (and five-token verifications) as one batched
pass (decoding/lm/batching.py) and as B solo passes; prints the times and their ratio (> 1: the
batched pass serves the B runs faster). This is why the app batches a class's runs on a CPU.

`--lean-ab R` instead times the batched passes themselves with the lean decoder off and on
(SPECDEC_LEAN_DYNAMIC 0 / 1, `decoding/lm/lean_dynamic.py`), alternating, R rounds, medians: a target that
returns logits and one that keeps its hidden states for a feature draft (the app's default pair), steps
and 5-token verify passes, and writes them to `--out` as JSON.

    .venv/bin/python experiments/batch_forward.py [--threads 1] [--repeats 5]
    .venv/bin/python experiments/batch_forward.py --lean-ab 20 --batches 1,4,8 --out docs/bench/batched-lean.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batches", default="1,2,4,8", help="comma-separated batch sizes")
    ap.add_argument("--lean-ab", type=int, default=0, metavar="R",
                    help="time batched passes with the lean decoder off and on, alternating, R rounds")
    ap.add_argument("--out", help="with --lean-ab: write the medians here as JSON")
    args = ap.parse_args(argv)
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        batches = []
    if args.threads < 1 or args.repeats < 1 or not batches or min(batches) < 1:
        print("error: --threads and --repeats must be >= 1, --batches whole numbers >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.lm import batching
    from decoding.lm.cached_lm import CachedLM
    from decoding.lm.models import load_model_cached

    torch.set_num_threads(args.threads)
    target = load_model_cached("default")
    print(f"target {target.name} in {str(target.dtype).removeprefix('torch.')}, torch threads {args.threads}")

    def filled(b: int, features: bool = False) -> list[CachedLM]:
        lms = []
        for i in range(b):
            lm = CachedLM(target.model, target.device, target.vocab_size)
            if features:
                lm.keep_features()  # as a target that a feature draft reads
            lm.forward_alone([1000 + (i * 37 + j) % 4000 for j in range(100 + 7 * i)])
            lms.append(lm)
        return lms

    def timed(step, lms, tokens) -> float:
        step(lms, tokens)  # warm-up (and the cache grows as a run's would)
        t0 = time.perf_counter()
        for _ in range(args.repeats):
            step(lms, tokens)
        return (time.perf_counter() - t0) / args.repeats

    def together(lms, tokens):
        batching.batched_forward(target.model, [batching.Call(lm, tokens, None) for lm in lms])

    def one_by_one(lms, tokens):
        for lm in lms:
            lm.forward_alone(tokens)

    if args.lean_ab:
        return lean_ab(args, target, filled, batches)
    with torch.inference_mode():
        for width in (1, 5):
            for b in batches:
                solo = timed(one_by_one, filled(b), [5] * width)
                joint = timed(together, filled(b), [5] * width) if b > 1 else solo
                print(f"{b} runs x {width} new token(s): one pass {1000 * joint:7.1f} ms, one by one "
                      f"{1000 * solo:7.1f} ms, ratio {solo / joint:.2f}")
    return 0


def lean_ab(args, target, filled, batches) -> int:
    """Batched passes (batching.batched_forward; a batch of 1 is a solo pass) with SPECDEC_LEAN_DYNAMIC 0 and 1,
    alternating within each round; prints and writes the median milliseconds and their ratio."""
    import json
    import os
    import platform
    import statistics

    import torch

    from decoding.lm import batching, lean_dynamic

    rows = []
    with torch.inference_mode():
        for features in (False, True):
            for width in (1, 5):
                for b in batches:
                    times = {"0": [], "1": []}
                    runs = {flag: filled(b, features) for flag in times}
                    for round_ in range(args.lean_ab + 1):  # round 0 warms up
                        for flag in (("0", "1") if round_ % 2 else ("1", "0")):
                            os.environ[lean_dynamic.ENV] = flag
                            lms = runs[flag]
                            t0 = time.perf_counter()
                            batching.batched_forward(target.model, [batching.Call(lm, [5] * width, None) for lm in lms])
                            elapsed = time.perf_counter() - t0
                            for lm in lms:
                                lm.rollback(lm.length - width)  # the same cache lengths every round
                            if round_:
                                times[flag].append(elapsed)
                    off, on = (1000 * statistics.median(times[f]) for f in ("0", "1"))
                    rows.append({"keeps_hidden_states": features, "runs": b, "new_tokens": width,
                                 "off_ms": round(off, 2), "on_ms": round(on, 2), "on_over_off": round(on / off, 3)})
                    print(f"{'hidden states' if features else 'logits':13} {b} runs x {width} token(s): HF's modules "
                          f"{off:7.1f} ms, lean {on:7.1f} ms, {on / off:.3f}x")
    os.environ.pop(lean_dynamic.ENV, None)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "command": "python experiments/batch_forward.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or platform.machine(),
            "target": target.name, "dtype": str(target.dtype).removeprefix("torch."), "threads": args.threads,
            "rounds": args.lean_ab, "cached_tokens": "100 + 7 i for run i", "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
