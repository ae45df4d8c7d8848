"""`python -m decoding.methods.ppd {tune,report}`: see hardware.py, tuning.py and report.py beside it
(training the prompt tokens: `python -m training train-ppd`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...paths import DEV_PROMPTS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m decoding.methods.ppd", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="hardware-aware tree size: L(n) on this device, T(n) on validation prompts")
    t.add_argument("--target", default="default")
    t.add_argument("--device", default=None)
    t.add_argument("--dtype", default=None)
    t.add_argument("--ppd-embeddings", default=None)
    t.add_argument("--sizes", default="2,4,8,12,16,24,32")
    t.add_argument("--prompts", default=str(DEV_PROMPTS))
    t.add_argument("--limit", type=int, default=8, help="validation prompts used for T(n)")
    t.add_argument("--max-new-tokens", type=int, default=32)
    t.add_argument("--context", type=int, default=64, help="cached context length for L(n)")
    t.add_argument("--reps", type=int, default=11, help="timed passes per tree size (round-robin over sizes)")
    t.add_argument("--no-save", action="store_true")
    t.add_argument("--json", action="store_true")
    r = sub.add_parser("report", help="the README table: accepted length, tokens/s, speedup vs AR per tree size")
    r.add_argument("--target", default="default")
    r.add_argument("--device", default=None)
    r.add_argument("--dtype", default=None)
    r.add_argument("--ppd-embeddings", default=None)
    r.add_argument("--sizes", default="8,16,32")
    r.add_argument("--prompts", default=str(DEV_PROMPTS))
    r.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    r.add_argument("--max-new-tokens", type=int, default=64)
    r.add_argument("--out", default=None, help="also write the JSON result here")
    return parser


def cmd_tune(args) -> dict:
    from ...lm.models import load_model
    from .hardware import acceptance_table, choose_tree_size, measure_latency, tokens_per_step
    from .tuning import device_key, save_tuning
    from .prompts import load_prompt_tokens
    from .report import load_prompt_ids
    from .tree import PRIOR_ACCEPTANCE

    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    target = load_model(args.target, device=args.device, dtype=args.dtype)
    prompts = load_prompt_tokens(target, args.ppd_embeddings)
    ids = load_prompt_ids(target, args.prompts, args.limit)
    latency = measure_latency(target, prompts, sizes, args.context, args.reps)
    # The acceptance table of these prompt tokens first (runs at the largest size, trees from the
    # prior table, never from an earlier tuning),
    # then T(n) with the trees built from it: the trees `--method ppd` will use once tuned.
    _, runs = tokens_per_step(target, ids, [sizes[-1]], args.max_new_tokens, args.ppd_embeddings, PRIOR_ACCEPTANCE)
    acceptance = acceptance_table(runs, prompts.m)
    tokens, _ = tokens_per_step(target, ids, sizes, args.max_new_tokens, args.ppd_embeddings, acceptance)
    best, curve = choose_tree_size(latency, tokens)
    entry = {"tree_size": best, "latency_s": latency, "tokens_per_step": tokens, "speedup_rel": curve,
             "acceptance": acceptance, "embeddings": prompts.source,
             "device": device_key(target), "prompts": args.prompts, "limit": args.limit}
    if not args.no_save:
        entry["saved_to"] = str(save_tuning(target, entry))
    return entry


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "tune":
            entry = cmd_tune(args)
            if args.json:
                print(json.dumps(entry))
            else:
                print(f"device {entry['device']}; embeddings: {entry['embeddings']}")
                print("   n   L(n) ms   T(n) tokens/step   relative speedup T/L")
                for n in sorted(entry["latency_s"]):
                    print(f"{n:4d} {1000 * entry['latency_s'][n]:9.2f} {entry['tokens_per_step'][n]:18.3f}"
                          f" {entry['speedup_rel'][n]:12.3f}")
                print(f"chosen tree size n* = {entry['tree_size']}" +
                      (f" (saved to {entry['saved_to']})" if "saved_to" in entry else ""))
            return 0
        if args.command == "report":
            from ...lm.models import load_model
            from .report import load_prompt_ids, markdown, ppd_table

            target = load_model(args.target, device=args.device, dtype=args.dtype)
            sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip()})
            result = ppd_table(target, load_prompt_ids(target, args.prompts, args.limit), sizes,
                               args.max_new_tokens, args.ppd_embeddings)
            if args.out:
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(result, indent=1))
            print(markdown(result))
            return 0
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
