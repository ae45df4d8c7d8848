"""Which precision the shipped draft should load in on this machine: its step and its long passes.

Times the distilled draft (beside the offline default target) in float16, bfloat16 and float32: one
pass over a long prompt (the draft's prefill, which the hybrid drafter makes at every long prompt),
a pass over 16 new tokens (its catch-up after a copied span) and a single-token step (its draft
step), each on a 500-token cache. `decoding.lm.devices.default_draft_dtype` rests on these figures.

    .venv/bin/python experiments/draft_dtype.py [--threads 1] [--prompt-tokens 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.repeats < 1 or args.prompt_tokens < 16:
        print("error: --threads and --repeats must be >= 1, --prompt-tokens >= 16", file=sys.stderr)
        return 2
    import torch

    from decoding.lm.cached_lm import CachedLM
    from decoding.run.pair import load_draft_value, load_pair

    torch.set_num_threads(args.threads)
    target, _ = load_pair("default", need_draft=False)
    context = [100 + i % 40000 for i in range(500)]
    prompt = [200 + i % 40000 for i in range(args.prompt_tokens)]

    def timed(draft, before: list[int], new: list[int]) -> float:
        """Best of the repeats: one pass over `new` after a cache holding `before`."""
        best = float("inf")
        for _ in range(args.repeats):
            lm = CachedLM(draft.model.model, draft.model.device, target.vocab_size, draft.head)
            if before:
                lm.extend(before, keep=1)
            start = time.perf_counter()
            lm.extend(before + new, keep=1)
            best = min(best, time.perf_counter() - start)
        return best

    print(f"draft passes, {args.threads} thread(s), best of {args.repeats} (ms):")
    print(f"| dtype | pass over {args.prompt_tokens} tokens | pass over 16 tokens | one step |")
    print("|---|---|---|---|")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        draft = load_draft_value("distilled", target, draft_dtype=dtype)
        long_pass = timed(draft, [], prompt)
        catch_up = timed(draft, context, prompt[:16])
        lm = CachedLM(draft.model.model, draft.model.device, target.vocab_size, draft.head)
        lm.extend(context, keep=1)
        steps = []
        for i in range(20):
            start = time.perf_counter()
            lm.forward([5 + i])
            steps.append(time.perf_counter() - start)
        name = str(dtype).removeprefix("torch.")
        print(f"| {name} | {long_pass * 1000:.1f} | {catch_up * 1000:.1f} | {statistics.median(steps) * 1000:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
