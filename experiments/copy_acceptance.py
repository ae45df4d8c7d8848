"""How copied spans and model drafts are accepted position by position, in real hybrid runs.

Runs greedy speculative decoding with the hybrid drafter at a fixed gamma (lookup spans up to that
long) on the Spec-Bench subset's prompts of the given categories and counts, per draft source and
position in the draft, how many positions were examined and how many accepted. The automatic gamma
schedule's two acceptance rates (first position, position after an accepted one) rest on this.

    .venv/bin/python experiments/copy_acceptance.py --categories summarization,rag [--gamma 12]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--categories", default="summarization,rag")
    ap.add_argument("--draft", default="hybrid")
    ap.add_argument("--gamma", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.gamma < 1 or args.max_new_tokens < 1 or args.threads < 1:
        print("error: --gamma, --max-new-tokens and --threads must be >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.run.pair import load_pair
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig
    from decoding.methods.speculative import ChainStep
    from decoding.rules.warp import SamplingConfig

    torch.set_num_threads(args.threads)
    wanted = {c.strip() for c in args.categories.split(",")}
    rows = [r for r in read_prompt_rows(args.prompts) if r.category in wanted]
    if not rows:
        print(f"error: no prompt of {args.prompts} has a category in {sorted(wanted)}", file=sys.stderr)
        return 2
    target, draft = load_pair("default", args.draft)
    counts = collections.defaultdict(lambda: [0, 0])  # (source, position) -> [examined, accepted]
    for row in rows:
        ids = target.encode_prompt(row.prompt, True)
        config = RunConfig(method="speculative", max_new_tokens=args.max_new_tokens,
                           sampling=SamplingConfig(temperature=0.0), gamma=args.gamma, chat=True,
                           stop_at_eos=False, lean=True)
        for record in decode(target, draft, ids, config):
            step = ChainStep.of(record)
            if step.source == "lookup":
                source = f"copy after a {min(step.match_length or 0, 5)}{'+' if (step.match_length or 0) >= 5 else ''}-token match"
            else:
                source = "model"
            for i, token in enumerate(record.draft):
                if token.accepted is None:
                    break
                counts[(source, i)][0] += 1
                counts[(source, i)][1] += int(token.accepted)
    print(f"{len(rows)} prompts ({', '.join(sorted(wanted))}), greedy, gamma {args.gamma}, "
          f"{args.max_new_tokens} new tokens; accepted/examined by draft position:")
    for source in sorted({key[0] for key in counts}):
        cells = [f"{counts[(source, i)][1]}/{counts[(source, i)][0]}" for i in range(args.gamma) if counts[(source, i)][0]]
        first = counts[(source, 0)]
        later = [sum(counts[(source, i)][k] for i in range(1, args.gamma)) for k in (0, 1)]
        print(f"- {source}: first {first[1] / max(1, first[0]):.2f}, after an accepted one "
              f"{later[1] / max(1, later[0]):.2f}  ({' '.join(cells)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
