"""Which shape the tree run actually drafts: per iteration of `--draft-tree N,D` with the automatic gamma (the
hybrid with the feature draft, greedy), the share of iterations that drew a tree, a model chain, a copy or
nothing, the tokens each emitted per target call and the levels drafted (a tree stops growing where its next
level does not pay). The automatic schedule (drafters/gamma_policy.py's choose_shape) picks the source and, for
the model, a tree or a chain, by expected tokens per second.

    PYTHONPATH=. .venv/bin/python experiments/tree_shape_usage.py --per-category 2 --draft-tree 16,6
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--per-category", type=int, default=2)
    ap.add_argument("--draft", default="hybrid:feature")
    ap.add_argument("--draft-tree", default="16,6")
    ap.add_argument("--gamma-schedule", default="auto")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--always-tree", action="store_true",
                    help="a model source always draws the tree (the schedule's shape choice overridden), to see "
                         "what it costs")
    args = ap.parse_args(argv)
    import torch

    if args.always_tree:
        from decoding.drafters.gamma_policy import GammaPolicy

        choose_shape = GammaPolicy.choose_shape

        def always_tree(self, sources, trees=True):
            source, gamma, shape = choose_shape(self, sources, trees)
            return source, gamma, "tree" if shape == "chain" and source.kind == "model" else shape

        GammaPolicy.choose_shape = always_tree

    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.methods.speculative import speculative
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_pair

    torch.set_num_threads(args.threads)
    picked, seen = [], collections.Counter()
    for r in read_prompt_rows(args.prompts):
        if seen[r.category] < args.per_category:
            picked.append(r)
            seen[r.category] += 1
    target, draft = load_pair("default", args.draft, dtype="bfloat16")
    tally = collections.defaultdict(collections.Counter)
    for prompt in picked:
        ids = target.encode_prompt(prompt.prompt, True)
        config = RunConfig(method="speculative", max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(0.0),
                           stop_at_eos=False, lean=True,
                           extra={"gamma_schedule": args.gamma_schedule, "draft_tree": args.draft_tree})
        for record in speculative(target, draft.drafter(target), ids, config):
            if record.context_length == len(ids):
                continue  # the prefill pass
            step = record.extra["tree_draft"]
            kind = step["shape"] if step["shape"] != "chain" else f"chain-{step['source']}"
            for key in (kind, "all", f"{prompt.category}: {kind}"):
                t = tally[key]
                t["iterations"] += 1
                t["emitted"] += len(record.emitted)
                t["drafted"] += step["drafted"]
                t["levels"] += record.gamma
                t["draft_s"] += record.timings.draft
                t["verify_s"] += record.timings.verify
                t["other_s"] += record.timings.other
    out = {k: {"iterations": t["iterations"], "share": t["iterations"] / tally["all"]["iterations"],
               "tokens_per_second": t["emitted"] / (t["draft_s"] + t["verify_s"] + t["other_s"]),
               "tokens_per_call": t["emitted"] / t["iterations"], "drafted_per_call": t["drafted"] / t["iterations"],
               "levels_per_call": t["levels"] / t["iterations"],
               "draft_ms_per_call": 1000 * t["draft_s"] / t["iterations"],
               "verify_ms_per_call": 1000 * t["verify_s"] / t["iterations"],
               "other_ms_per_call": 1000 * t["other_s"] / t["iterations"]} for k, t in sorted(tally.items())}
    print(json.dumps({"draft_tree": args.draft_tree, "prompts": len(picked), "shapes": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
