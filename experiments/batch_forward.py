"""What one forward pass over several runs' tokens costs against the same runs one after another.

Loads the offline default target in the machine's fast precision, fills B KV caches with prompts of
different lengths, and times B runs' one-token steps (and five-token verifications) as one batched
pass (decoding/lm/batching.py) and as B solo passes; prints the times and their ratio (> 1: the
batched pass serves the B runs faster). This is why the app batches a class's runs on a CPU.

    .venv/bin/python experiments/batch_forward.py [--threads 1] [--repeats 5]
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

    def filled(b: int) -> list[CachedLM]:
        lms = []
        for i in range(b):
            lm = CachedLM(target.model, target.device, target.vocab_size)
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

    with torch.inference_mode():
        for width in (1, 5):
            for b in batches:
                solo = timed(one_by_one, filled(b), [5] * width)
                joint = timed(together, filled(b), [5] * width) if b > 1 else solo
                print(f"{b} runs x {width} new token(s): one pass {1000 * joint:7.1f} ms, one by one "
                      f"{1000 * solo:7.1f} ms, ratio {solo / joint:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
