"""How should a CPU serve several model runs at once: one run at a time on every core, or one run
per core on one torch thread each? The app sizes its model slots from this measurement.

Runs the same batch of runs of the default set-up (the Explainer's defaults: speculative decoding,
the offline default pair in the machine's fast precision, greedy) twice in one process:
  sequential  one run after the other, torch on all usable cores;
  parallel    the runs spread over one worker per core, torch on one thread;
and prints both wall times and their ratio (> 1: parallel serves the batch faster).

    .venv/bin/python scripts/thread_layout.py --runs 8 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--draft", default=None, help="draft spec (default: the default pair's draft)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 2 or args.max_new_tokens < 1:
        print("error: --runs must be >= 2 and --max-new-tokens >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.devices import usable_cores
    from decoding.warp import SamplingConfig
    from decoding.pair import load_pair
    from decoding.runner import generate
    from decoding.strategies import RunConfig

    cores = usable_cores()
    target, draft = load_pair(draft_spec=args.draft, cached=True)
    prompts = [f"Student {i}: list three animals that start with the letter {chr(65 + i)}." for i in range(args.runs)]
    config = RunConfig(method="speculative", gamma=4, sampling=SamplingConfig(temperature=0.0), chat=True,
                       max_new_tokens=args.max_new_tokens)

    def one(prompt: str) -> list[int]:
        return generate(target, draft, prompt, config)[1].token_ids

    one(prompts[0])  # warm-up
    torch.set_num_threads(cores)
    t0 = time.perf_counter()
    tokens_seq = [one(p) for p in prompts]
    sequential = time.perf_counter() - t0
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(cores) as pool:
        tokens_par = list(pool.map(one, prompts))
    parallel = time.perf_counter() - t0
    result = {"cores": cores, "runs": args.runs, "max_new_tokens": args.max_new_tokens,
              "precision": str(target.dtype).removeprefix("torch."), "draft": draft.name,
              "sequential_s": round(sequential, 2), "sequential_threads": cores,
              "parallel_s": round(parallel, 2), "parallel_workers": cores,
              "tokens": sum(map(len, tokens_seq)), "same_tokens": f"{sum(a == b for a, b in zip(tokens_seq, tokens_par))}/"
              f"{len(prompts)}", "parallel_speedup": round(sequential / parallel, 3)}
    print(json.dumps(result) if args.json else "\n".join(f"{k:20s} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
