"""Measure this device's draft-tree size and store it where `--draft-tree auto` reads it
(`decoding/methods/tree_tune.py` says what is measured and where it is kept).

    python -m decoding.eval.tree_tune --draft hybrid:feature [--dtype bfloat16] [--sizes "8,4;16,6;24,7"]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..methods.tree_tune import save_tuning

SIZES = "4,2;6,3;8,3;8,4;12,5;16,6"  # the default (methods/tree_draft.py) among them


def tune(target, draft, prompt_ids: list[list[int]], sizes: list[str], max_new_tokens: int = 48,
         schedule: str = "auto") -> dict:
    """Greedy decoding of every prompt with the chain ("off") and each draft tree in `sizes` ("N,D"),
    interleaved per prompt; per candidate: tokens per second (total tokens / total decoding seconds) and
    tokens per target call. Returns the entry `save_tuning` stores: the best tree's nodes and depth."""
    from ..methods.base import RunConfig
    from ..methods.tree_draft import parse_draft_tree
    from ..rules.warp import SamplingConfig
    from ..run.runner import decode

    candidates = ["off"] + sizes
    tokens = dict.fromkeys(candidates, 0)
    seconds = dict.fromkeys(candidates, 0.0)
    calls = dict.fromkeys(candidates, 0)
    for i, ids in enumerate(prompt_ids):
        order = candidates[i % len(candidates):] + candidates[: i % len(candidates)]
        for c in order:
            config = RunConfig(method="speculative", max_new_tokens=max_new_tokens, sampling=SamplingConfig(0.0),
                               stop_at_eos=False, lean=True, extra={"draft_tree": c, "gamma_schedule": schedule})
            records = list(decode(target, draft, ids, config))
            tokens[c] += sum(len(r.emitted) for r in records)
            seconds[c] += records[-1].elapsed
            calls[c] += records[-1].target_calls
    speed = {c: tokens[c] / seconds[c] for c in candidates}
    best = max(sizes, key=lambda c: speed[c])
    n, d = parse_draft_tree(best)
    return {"nodes": n, "depth": d, "tokens_per_second": speed, "tokens_per_call": {c: tokens[c] / calls[c]
            for c in candidates}, "prompts": len(prompt_ids), "max_new_tokens": max_new_tokens,
            "schedule": schedule, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def main(argv=None) -> int:
    import torch

    from ..lm.models import load_model
    from ..lm.prompt_files import read_prompts
    from ..paths import DEV_PROMPTS
    from ..run.pair import load_draft_value

    parser = argparse.ArgumentParser(prog="python -m decoding.eval.tree_tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default="hybrid:feature")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--sizes", default=SIZES, help="candidate trees N,D separated by ';'")
    parser.add_argument("--prompts", default=str(DEV_PROMPTS))
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    from ..methods.tree_draft import parse_draft_tree

    try:
        sizes = [s.strip() for s in args.sizes.split(";") if s.strip()]
        for s in sizes:
            if not isinstance(parse_draft_tree(s), tuple):
                raise ValueError(f"--sizes lists trees N,D (got {s!r})")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    target = load_model(args.target, device=args.device, dtype=args.dtype)
    draft = load_draft_value(args.draft, target)
    ids = [target.encode_prompt(p, True) for p in read_prompts(args.prompts)[: args.limit]]
    list(tune(target, draft, ids[:1], sizes[:1], 8))  # warm-up
    entry = tune(target, draft, ids, sizes, args.max_new_tokens)

    print(json.dumps(entry, indent=1))
    if not args.no_save:
        path = save_tuning(target, draft.drafter(target), entry)
        print(f"saved to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
