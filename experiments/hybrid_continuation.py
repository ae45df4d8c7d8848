"""Does continuing a model draft with a copy pay? The hybrid with and without it, in one run.

For each prompt, in turn: our autoregressive decoding, the hybrid drafter with
`continue_with_copy=False` (a model draft stays as the model drafted it) and the shipped hybrid (a
model draft that makes the context repeat is continued by a copy). Greedy, EOS ignored, the default
pair in the machine's default precision. Per category it prints each variant's speedup over
autoregressive decoding in this run, its tokens per target call, and the speedup after the prompt's
prefill pass; `--out` keeps the figures as JSON.

    .venv/bin/python experiments/hybrid_continuation.py [--categories summarization,rag] [--gamma auto]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--categories", default="all", help="comma-separated, or all")
    ap.add_argument("--gamma", default="auto", help="a fixed gamma, or auto")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--continue-matches", default="",
                    help="also run the hybrid continuing after a repeat of each of these lengths (e.g. 3,4)")
    ap.add_argument("--out", default=None, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    fixed = args.gamma.isdigit() and int(args.gamma) >= 1
    try:
        lengths = [int(x) for x in args.continue_matches.split(",") if x.strip()]
    except ValueError:
        lengths = [0]
    if any(n < 1 for n in lengths):
        print("error: --continue-matches takes repeat lengths >= 1, comma-separated", file=sys.stderr)
        return 2
    variants = ["autoregressive", "hybrid-no-continuation", "hybrid"] + [f"hybrid-continue-{n}" for n in lengths]
    if not fixed and args.gamma != "auto" or args.max_new_tokens < 1 or args.threads < 1:
        print("error: --gamma must be >= 1 or auto; --max-new-tokens and --threads >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.ours import timed_run
    from decoding.trace.metrics import RunCounts
    from decoding.methods.registry import method_spec
    from decoding.run.pair import load_pair
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    torch.set_num_threads(args.threads)
    rows = read_prompt_rows(args.prompts)
    if args.categories != "all":
        wanted = {c.strip() for c in args.categories.split(",")}
        rows = [r for r in rows if r.category in wanted]
    if not rows:
        print(f"error: no prompt of {args.prompts} in categories {args.categories}", file=sys.stderr)
        return 2
    target, draft = load_pair("default", "hybrid")

    def run(variant: str, ids: list[int]) -> RunCounts:
        method = "autoregressive" if variant == "autoregressive" else "speculative"
        extra = {} if fixed else {"gamma_schedule": "auto"}
        config = RunConfig(method=method, max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(temperature=0.0),
                           gamma=int(args.gamma) if fixed else 4, chat=True, stop_at_eos=False, lean=True, extra=extra)
        drafter = draft.drafter(target) if method == "speculative" else None
        if drafter is not None:
            drafter.continue_with_copy = variant != "hybrid-no-continuation"
            if variant.startswith("hybrid-continue-"):
                drafter.continue_min_match = int(variant.rsplit("-", 1)[1])
        return timed_run(method_spec(method)(target, drafter, ids, config))[1]

    run("hybrid", target.encode_prompt(rows[0].prompt, True))  # warm-up
    totals: dict = {}
    for row in rows:
        ids = target.encode_prompt(row.prompt, True)
        for variant in variants:
            counts = run(variant, ids)
            for key in (row.category or "uncategorized", "all"):
                totals.setdefault(key, {}).setdefault(variant, RunCounts())
                totals[key][variant] = totals[key][variant] + counts
    figures = {}
    print(f"{len(rows)} prompts, greedy, gamma {args.gamma}, {args.max_new_tokens} new tokens, "
          f"{target.dtype}, {args.threads} thread(s): speedup / tokens per call / speedup after the prefill")
    for key, per in totals.items():
        ar = per["autoregressive"]
        figures[key] = {v: {"speedup": c.tokens_per_second / ar.tokens_per_second,
                            "tokens_per_call": c.tokens_per_call,
                            "speedup_after_first_pass": c.tokens_per_second_after_first_pass
                            / ar.tokens_per_second_after_first_pass} for v, c in per.items()}
        cells = [f"{v} {f['speedup']:.2f}x / {f['tokens_per_call']:.2f} / {f['speedup_after_first_pass']:.2f}x"
                 for v, f in figures[key].items() if v != "autoregressive"]
        print(f"- {key}: " + "; ".join(cells))
    if args.out:
        Path(args.out).write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "gamma": args.gamma,
                                              "dtype": str(target.dtype), "threads": args.threads,
                                              "figures": figures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
