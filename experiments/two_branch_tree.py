"""Would a two-branch tree pay: the hybrid's chosen draft and its other source's, verified in one pass?

Runs greedy speculative decoding with the hybrid drafter and the automatic gamma (as the benchmark
does) on the Spec-Bench subset's prompts of the given categories. In every iteration after the
prefill it also drafts from the source the hybrid did not choose (the model's 4 tokens when it
copied, the copy of the context's suffix match, up to 8 tokens, when the model drafted) and counts
how many of those tokens the target would have accepted: the leading ones equal to the run's own
output from that position on (greedy: what the target emits there). A tree of both branches would
emit max(chain accepted, other accepted) + 1 tokens in a pass over both branches' tokens. Its time
is costed with the verify-pass times per pass size and the draft step time of a benchmark run of
the same variant (`--bench`), against the chain's pass and draft times from the same table.

    .venv/bin/python experiments/two_branch_tree.py --categories summarization,rag
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODEL_TOKENS, COPY_TOKENS = 4, 8  # the other branch's length: a model draft, a copy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--categories", default="summarization,rag")
    ap.add_argument("--draft", default="hybrid:feature")
    ap.add_argument("--bench", default="docs/bench/spec-bench-bfloat16/bench.json",
                    help="a benchmark run with this hybrid (automatic gamma): its verify times and draft step time")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.max_new_tokens < 1 or args.threads < 1:
        print("error: --max-new-tokens and --threads must be >= 1", file=sys.stderr)
        return 2
    try:
        bench = json.loads(Path(args.bench).read_text())
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the benchmark run {args.bench}: {exc}", file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.ceiling import leading_equal
    from decoding.eval.bench.cli import draft_label
    from decoding.drafters.lookup import copy_proposal, lookup_source
    from decoding.run.pair import load_pair
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.methods.speculative import speculative
    from decoding.rules.warp import SamplingConfig

    torch.set_num_threads(args.threads)
    wanted = {c.strip() for c in args.categories.split(",")}
    rows = [r for r in read_prompt_rows(args.prompts) if r.category in wanted]
    if not rows:
        print(f"error: no prompt of {args.prompts} has a category in {sorted(wanted)}", file=sys.stderr)
        return 2
    target, draft = load_pair("default", args.draft, dtype=bench["models"].get("dtype", "torch.bfloat16").split(".")[-1])
    key = f"speculative-{draft_label(args.draft)}-auto"
    row = bench["methods"].get(key)
    if row is None or not row.get("verify_ms_by_tokens") or row.get("t_draft_step_ms") is None:
        print(f"error: {args.bench} has no timed row {key}", file=sys.stderr)
        return 2
    verify_ms = {int(n): ms for n, ms in row["verify_ms_by_tokens"].items()}
    step_ms = row["t_draft_step_ms"]

    def verify(n: int) -> float:  # the measured pass of the nearest size at or below n (the largest beyond)
        return verify_ms[max(k for k in verify_ms if k <= n)] if n <= max(verify_ms) else verify_ms[max(verify_ms)]

    totals = collections.defaultdict(collections.Counter)
    for prompt in rows:
        drafter = draft.drafter(target)
        others = []  # per drafted iteration: (the chosen source's kind, the other branch's tokens)
        chosen_propose = drafter.propose

        def propose(sequence, gamma, sampling, generator, keep_going=None, source=None, exact=False):
            proposal = chosen_propose(sequence, gamma, sampling, generator, keep_going, source, exact)
            if source is not None and source.kind == "lookup":
                other = (drafter.model.propose(sequence, MODEL_TOKENS, sampling, generator).tokens
                         if drafter.model.sources(sequence) else [])
            else:
                copy = lookup_source(sequence, drafter.max_match)
                other = copy_proposal(sequence, copy, COPY_TOKENS, drafter.vocab_width, drafter.device).tokens if copy else []
            others.append((source.kind if source is not None else "model", other))
            return proposal

        drafter.propose = propose
        ids = target.encode_prompt(prompt.prompt, bench["settings"].get("chat", False))
        config = RunConfig(method="speculative", max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(0.0),
                           stop_at_eos=False, lean=True, extra={"gamma_schedule": "auto"})
        records = list(speculative(target, drafter, ids, config))
        output = [t.token_id for r in records for t in r.emitted]
        drafted = [r for r in records if r.draft]
        assert len(drafted) == len(others)
        t = totals[prompt.category]
        for record, (kind, other) in zip(drafted, others):
            if record.context_length == len(ids):
                continue  # the prefill pass
            accepted = leading_equal(other, output[record.context_length - len(ids):])
            k = len(record.draft)
            shared = leading_equal(other, [d.token_id for d in record.draft])  # a shared start is one path
            t["iterations"] += 1
            t["chain_tokens"] += len(record.emitted)
            t["tree_tokens"] += max(len(record.emitted), accepted + 1)
            t["other_longer"] += accepted + 1 > len(record.emitted)
            model_steps = k if kind == "model" else 0
            t["chain_ms"] += verify(k + 1) + step_ms * model_steps
            t["tree_ms"] += verify(k + len(other) - shared + 1) + step_ms * (model_steps or len(other))
    print(f"{args.draft}, greedy, automatic gamma, {args.max_new_tokens} new tokens; costs from {args.bench} "
          f"(verify passes by size, draft step {step_ms:.2f} ms)")
    for category, t in sorted(totals.items()):
        n = t["iterations"]
        chain_rate, tree_rate = t["chain_tokens"] / t["chain_ms"], t["tree_tokens"] / t["tree_ms"]
        print(f"- {category}: {n} iterations; tokens per pass {t['chain_tokens'] / n:.2f} chain, "
              f"{t['tree_tokens'] / n:.2f} tree (the other branch longer in {t['other_longer']}); ms per pass "
              f"{t['chain_ms'] / n:.1f} chain, {t['tree_ms'] / n:.1f} tree; tree speed / chain speed {tree_rate / chain_rate:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
