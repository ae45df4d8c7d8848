"""Does the dynamic path's lean decoder (`decoding/lm/lean_dynamic.py`, SPECDEC_LEAN_DYNAMIC=1) change anything the
real pair produces? Greedy texts and logits of the default target with the switch off and on.

For every --every-th prompt of the Spec-Bench subset (chat template, end of sequence ignored, as the benchmark's
runs): 64 greedy tokens of plain decoding and of speculative decoding with the hybrid and the feature draft
drafting trees (--draft-tree 6,3, gamma 4, the CLI's fixed schedule), each with the switch off, then on; the token
ids must be equal. A control: the same trees with the automatic schedule, run off, off again, then on. That
schedule chooses each iteration's shape from this run's wall-clock costs, so which passes the target runs, and
with them its bfloat16 rounding, can change from run to run on the same path; its equalities are counted, not
required. Then the target's logits of a prefill and the next 8 one-token steps, 5- and 9-token verify passes after
a rollback, off and on: torch.equal. Off runs first (HF's modules on the weights as loaded) and prompt 0's plain
run is repeated off at the end (after the lean path re-pointed the projections at its fused weights). Counts the
passes that went through the lean body. A correctness check, not a timing.

    PYTHONPATH=. .venv/bin/python experiments/lean_dynamic_texts.py [--dtype bfloat16] [--every 8]
        [--out docs/bench/lean-dynamic-texts-bfloat16.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.paths import display_command  # noqa: E402 (after the path insert)

ENV = "SPECDEC_LEAN_DYNAMIC"


def _logits(target, ids, flag: str) -> list:
    """A prefill, 8 greedy one-token steps, a rollback by 4 and a 5-token then a 9-token pass: all logits."""
    from decoding.lm.cached_lm import CachedLM

    os.environ[ENV] = flag
    lm = CachedLM(target.model, target.device, target.vocab_size)
    out = [lm.forward(ids)]
    seq = list(ids)
    for _ in range(8):
        seq.append(int(out[-1][-1].argmax()))
        out.append(lm.forward(seq[-1:]))
    lm.rollback(len(seq) - 4)
    out += [lm.forward(seq[-4:] + [42]), lm.forward([1337, 7, 99, 5, 6, 7, 8, 9, 10])]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--every", type=int, default=8, help="every n-th prompt (8: 6 of the 48, one per category)")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--draft-tree", default="6,3")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.every < 1 or args.max_new_tokens < 1 or args.threads < 1:
        print("error: --every, --max-new-tokens and --threads must be >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.lm import lean_dynamic
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.methods.tree_draft import TreeDraftStep
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_pair
    from decoding.run.runner import decode

    torch.set_num_threads(args.threads)
    lean_passes = []
    real = lean_dynamic.body

    def counted(*a, **k):  # the passes that went through the lean body (CachedLM calls lean_dynamic.body)
        lean_passes.append(1)
        return real(*a, **k)

    lean_dynamic.body = counted
    target, draft = load_pair("default", "hybrid:feature", dtype=args.dtype)
    prompts = read_prompt_rows(args.prompts)[:: args.every]
    common = dict(max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(temperature=0.0), stop_at_eos=False,
                  lean=True, chat=True)
    tree = {"draft_tree": args.draft_tree}
    configs = {  # name: (draft, config, the switch per run; the first run is the reference, "*": a control)
        "autoregressive": (None, RunConfig(method="autoregressive", **common), ("0", "1")),
        f"hybrid:feature tree {args.draft_tree}": (draft, RunConfig(
            method="speculative", extra={**tree, "gamma_schedule": "fixed"}, **common), ("0", "1")),
        f"hybrid:feature tree {args.draft_tree} auto*": (draft, RunConfig(
            method="speculative", extra={**tree, "gamma_schedule": "auto"}, **common), ("0", "0", "1"))}
    rows, first = [], None
    for prompt in prompts:
        ids = target.encode_prompt(prompt.prompt, True)
        row = {"prompt": prompt.id, "category": prompt.category, "prompt_tokens": len(ids)}
        for name, (drafting, config, flags) in configs.items():
            runs = []
            for run, flag in enumerate(flags):
                os.environ[ENV] = flag
                before = len(lean_passes)
                records = list(decode(target, drafting, ids, config))
                runs.append([t.token_id for r in records for t in r.emitted])
                if not run and drafting is not None:
                    row[f"{name} tree iterations (run 0)"] = sum(TreeDraftStep.of(r).shape == "tree" for r in records)
                row[f"{name} lean passes (run {run}, switch {flag})"] = len(lean_passes) - before
                if run:
                    row[f"{name} run {run} (switch {flag}) equal to run 0 (switch 0)"] = runs[run] == runs[0]
            if first is None:
                first = (ids, runs[0])
        off, on = _logits(target, ids, "0"), _logits(target, ids, "1")
        row["logits equal"] = all(torch.equal(a, b) for a, b in zip(off, on))
        row["logits max abs diff"] = max(float((a - b).abs().max()) for a, b in zip(off, on))
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.environ[ENV] = "0"
    again = [t.token_id for r in decode(target, None, first[0], configs["autoregressive"][1]) for t in r.emitted]
    summary = {"command": display_command("python experiments/lean_dynamic_texts.py",
                                          sys.argv[1:] if argv is None else argv),
               "dtype": args.dtype, "max_new_tokens": args.max_new_tokens, "prompts": len(rows),
               "all_texts_equal": all(v for r in rows for k, v in r.items() if "(switch 0)" in k and "*" not in k),
               "auto_schedule_control": {k: sum(r[k] for r in rows) for k in rows[0] if "*" in k and "equal" in k},
               "all_logits_equal": all(r["logits equal"] for r in rows),
               "hf_path_unchanged_after_repointing": again == first[1],
               "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    ok = summary["all_texts_equal"] and summary["all_logits_equal"] and summary["hf_path_unchanged_after_repointing"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
