"""Is greedy text with draft trees equal to plain decoding on the real pair in float32, on every prompt?

Decodes each prompt of the Spec-Bench subset greedily (chat template, end of sequence ignored, as the
benchmark's timing runs) with our autoregressive decoding and with speculative decoding drafting trees
(`--draft-tree`, default 16,6, the hybrid with the feature draft, the automatic schedule) in float32, and
compares the token ids. Prints one line per prompt that differs and a JSON summary; exit status 1 if any
differs. A correctness check on real models, not a timing (the test suite checks the same on tiny models).

    .venv/bin/python experiments/tree_greedy_equality.py [--draft-tree 16,6] [--out docs/bench/tree-greedy-float32.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--draft", default="hybrid:feature")
    ap.add_argument("--draft-tree", default="16,6")
    ap.add_argument("--gamma-schedule", default="auto")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    from decoding.lm.models import load_model
    from decoding.lm.prompt_files import read_prompts
    from decoding.methods.base import RunConfig
    from decoding.methods.tree_draft import TreeDraftStep
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_draft_value
    from decoding.run.runner import decode

    torch.set_num_threads(args.threads)
    target = load_model("default", dtype="float32")
    draft = load_draft_value(args.draft, target, "float32", "bfloat16")
    greedy = SamplingConfig(temperature=0.0)
    prompts = read_prompts(args.prompts)
    differ, trees, accepted_in_trees = [], 0, 0
    for i, prompt in enumerate(prompts):
        ids = target.encode_prompt(getattr(prompt, "prompt", prompt), True)
        common = dict(max_new_tokens=args.max_new_tokens, sampling=greedy, stop_at_eos=False, lean=True)
        plain = [t.token_id for r in decode(target, None, ids, RunConfig(method="autoregressive", **common))
                 for t in r.emitted]
        config = RunConfig(method="speculative", extra={"draft_tree": args.draft_tree,
                                                        "gamma_schedule": args.gamma_schedule}, **common)
        records = list(decode(target, draft, ids, config))
        tree = [t.token_id for r in records for t in r.emitted]
        for r in records:
            if (TreeDraftStep.of(r).shape or "") == "tree":
                trees += 1
                accepted_in_trees += r.accepted_length
        if tree != plain:
            differ.append(i)
            print(f"prompt {i} differs", file=sys.stderr)
    summary = {"prompts": len(prompts), "equal": len(prompts) - len(differ), "differ": differ,
               "draft": args.draft, "draft_tree": args.draft_tree, "gamma_schedule": args.gamma_schedule,
               "dtype": "float32", "max_new_tokens": args.max_new_tokens, "tree_iterations": trees,
               "accepted_in_tree_iterations": accepted_in_trees,
               "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
