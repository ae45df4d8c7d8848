"""How should a CPU serve several model runs at once: one run at a time on every core, one run
per core on one torch thread each, or many runs sharing batched forward passes? The app sizes its
model slots and threads from this measurement.

Runs the same batch of runs of the default set-up (the Explainer's defaults: speculative decoding,
the offline default pair in the machine's fast precision, greedy) in one process, once per layout:
  sequential    one run after the other, torch on all usable cores;
  parallel      the runs spread over one worker per core, torch on one thread;
  batched-tN    the runs spread over --batch workers with cross-run batching on
                (decoding/lm/batching.py), torch on N threads (1 and all cores);
and prints each wall time, its speedup over sequential, and how many runs' greedy tokens equal the
sequential ones (batched passes round differently in bfloat16, so a few may part ways).

    .venv/bin/python experiments/thread_layout.py --runs 16 --max-new-tokens 32
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
    ap.add_argument("--batch", type=int, default=8, help="concurrent runs in the batched layouts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 2 or args.max_new_tokens < 1 or args.batch < 2:
        print("error: --runs and --batch must be >= 2 and --max-new-tokens >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.lm.devices import usable_cores
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_pair
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig

    cores = usable_cores()
    target, draft = load_pair(draft_spec=args.draft, cached=True)
    prompts = [f"Student {i}: list three animals that start with the letter {chr(65 + i % 26)}." for i in range(args.runs)]
    config = RunConfig(method="speculative", gamma=4, sampling=SamplingConfig(temperature=0.0), chat=True,
                       max_new_tokens=args.max_new_tokens)

    def one(prompt: str) -> list[int]:
        return generate(target, draft, prompt, config)[1].token_ids

    from decoding.lm import batching

    def layout(threads: int, workers: int, batched: bool) -> tuple[float, list[list[int]]]:
        torch.set_num_threads(threads)
        if batched:
            batching.enable(max_batch=args.batch)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            tokens = list(pool.map(one, prompts))
        batching.disable()
        return time.perf_counter() - t0, tokens

    one(prompts[0])  # warm-up
    sequential, tokens_seq = layout(cores, 1, False)
    result = {"cores": cores, "runs": args.runs, "max_new_tokens": args.max_new_tokens,
              "precision": str(target.dtype).removeprefix("torch."), "draft": draft.name,
              "tokens": sum(map(len, tokens_seq)), "sequential_s": round(sequential, 2)}
    layouts = {"parallel": (1, cores, False), "batched-t1": (1, args.batch, True)}
    if cores > 1:
        layouts[f"batched-t{cores}"] = (cores, args.batch, True)
    for name, (threads, workers, batched) in layouts.items():
        seconds, tokens = layout(threads, workers, batched)
        result[f"{name}_s"] = round(seconds, 2)
        result[f"{name}_speedup"] = round(sequential / seconds, 3)
        result[f"{name}_same_tokens"] = f"{sum(a == b for a, b in zip(tokens_seq, tokens))}/{len(prompts)}"
    print(json.dumps(result) if args.json else "\n".join(f"{k:20s} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
