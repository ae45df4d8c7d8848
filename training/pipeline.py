"""`python -m training all` (`make distill`): data -> train -> export -> eval-draft -> model card.

Each stage resumes where it stopped. `--stage-seconds S` (default 2400, about 40 minutes) bounds
every stage of this invocation; when a stage stops early the command says so and exits 3, and
running the same command again continues. Uses a GPU automatically when one is present.
"""

from __future__ import annotations

import argparse
import json
import sys

from .config import get_config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training all")
    ap.add_argument("--config", default="full")
    ap.add_argument("--stage-seconds", type=float, default=2400.0)
    ap.add_argument("--eval-prompts", default="benchmarks/dev.jsonl",
                    help="prompt file for the measured figures of the model card ('' to skip)")
    args = ap.parse_args(argv)
    cfg = get_config(args.config)

    from .data import generate, job_batches
    from .export import export, write_card
    from .train import train

    n_batches = len(job_batches(cfg, len(cfg.prompt_texts())))
    needed = cfg.train_shards or n_batches
    have = generate(cfg, max_seconds=args.stage_seconds, limit_shards=0)
    if have < needed:
        print(f"distill: {have}/{needed} data shards; run the same command again to continue", file=sys.stderr)
        return 3
    state = train(cfg, max_seconds=args.stage_seconds)
    if not state.get("finished"):
        print("distill: training stopped early; run the same command again to continue", file=sys.stderr)
        return 3
    out = export(cfg)
    report, command = None, ""
    if args.eval_prompts:
        from decoding.eval.eval_draft import evaluate
        from decoding.run.pair import load_draft_value, load_pair
        from decoding.lm.prompt_files import read_prompts

        target, _ = load_pair(cfg.target, need_draft=False)
        draft = load_draft_value(str(out), target)
        report = evaluate(target, [draft, "prompt-lookup"], read_prompts(args.eval_prompts), 128)
        report["prompt_file"] = args.eval_prompts
        (out / "eval.json").write_text(json.dumps(report, indent=1))
        command = f"python -m decoding eval-draft --prompts {args.eval_prompts} --max-new-tokens 128"
    write_card(out, report, command)
    print(f"distill: done; the draft is in {out}")
    return 0
