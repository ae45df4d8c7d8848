"""How far can copying (and today's draft model) take greedy speculative decoding on Spec-Bench?

Decodes every prompt autoregressively (greedy, the benchmark's settings: chat template, a fixed
number of new tokens, no stop at end of sequence) with the engine, then replays each output under
drafting rules (`decoding/eval/bench/ceiling.py`): the engine's prompt lookup, and oracles that know the
output (where to copy from, when, how much). A pass over n new tokens costs what `python -m decoding
verify-cost` measured (`--verify-cost`, one file per cached context, interpolated); each category's
prefill share and autoregressive time come from a benchmark run (`--bench`), so the speedups are
the whole run's, as the benchmark reports them. Where a rule copies nothing, the `+ model` rows hand
the position to a draft model in expectation, with the alpha and c that `eval-draft` measured for the
shipped feature draft (`--draft-eval`) or a stronger one (`--alphas`).

    .venv/bin/python experiments/copy_ceiling.py --out docs/bench/copy-ceiling.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.paths import display_command  # noqa: E402 (after the path insert)

CATEGORIES = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
# Copy lengths by match length for the row that asks whether a longer match should copy more: the
# accepted run of a copy grows with the match it follows (the JSON's runs_by_match measures it).
COPY_BY_MATCH = {2: 4, 4: 8, 8: 12, 16: 24}


def rules(alpha: float, c: float, extra_alphas: list[float]):
    """(key, name, rule, model) rows, in the order the table shows them; the key names a row for
    readers of the JSON (scripts/performance_report.py), the name is what the table shows."""
    from decoding.eval.bench import ceiling as cl
    from decoding.drafters.corpus import load_corpus
    from decoding.paths import SHIPPED_CORPUS

    corpus = load_corpus(str(SHIPPED_CORPUS))
    model = cl.ModelDraft(alpha, c)
    rows = [
        ("lookup", "prompt lookup, 4 tokens (the engine's rule)", cl.lookup_rule(4), None),
        ("lookup-corpus", "lookup after a 2-token match, else the corpus, else lookup",
         cl.hybrid_copy_rule(4, corpus), None),
        ("tree-2", "copy tree: 2 occurrences x 4 tokens", cl.copy_tree(2, 4), None),
        ("tree-3", "copy tree: 3 occurrences x 4 tokens", cl.copy_tree(3, 4), None),
        ("oracle-gate", "oracle: lookup only where its first token is right", cl.oracle_gate(4), None),
        ("oracle-length", "oracle: lookup's occurrence, exactly its accepted length", cl.oracle_length, None),
        ("oracle-choice", "oracle: the best occurrence, 4 tokens", cl.oracle_choice(4), None),
        ("oracle-copy", "oracle copy: the best occurrence, exactly its accepted length", cl.oracle_copy, None),
        ("model", f"model alone (alpha {alpha:.2f}, c {c:.3f})", None, model),
        ("long-lookup+model", f"lookup after a 2-token match + model (alpha {alpha:.2f})",
         cl.hybrid_copy_rule(4, short_copies=False), model),
        ("long-lookup-corpus+model", f"lookup after a 2-token match, else the corpus + model (alpha {alpha:.2f})",
         cl.hybrid_copy_rule(4, corpus, short_copies=False), model),
        ("long-lookup-8+model", f"lookup after a 2-token match, 8 tokens (the hybrid's) + model (alpha {alpha:.2f})",
         cl.hybrid_copy_rule(8, short_copies=False), model),
        ("long-lookup-by-match+model", "lookup after a 2-token match, 4/8/12/24 tokens after a 2/4/8/16-token match "
         f"+ model (alpha {alpha:.2f})", cl.hybrid_copy_rule(cl.by_match_length(COPY_BY_MATCH), short_copies=False),
         model),
        ("oracle-length-long+model", "oracle: lookup after a 2-token match, exactly its accepted length + model "
         f"(alpha {alpha:.2f})", lambda sequence, t: cl.oracle_length(sequence, t, min_match=2), model),
        ("oracle-copy+model", f"oracle copy + model (alpha {alpha:.2f})", cl.oracle_copy, model),
    ]
    for a in extra_alphas:
        rows.append((f"model-{a:.2f}", f"model alone (alpha {a:.2f})", None, cl.ModelDraft(a, c)))
        rows.append((f"oracle-copy+model-{a:.2f}", f"oracle copy + model (alpha {a:.2f})", cl.oracle_copy,
                     cl.ModelDraft(a, c)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--bench", default="docs/bench/spec-bench-bfloat16/bench.json",
                    help="a benchmark run: per category the autoregressive time and its prefill share")
    ap.add_argument("--verify-cost", default="docs/bench/verify-cost.json,docs/bench/verify-cost-long.json",
                    help="comma-separated verify-cost JSON files (one per cached context)")
    ap.add_argument("--draft-eval", default="docs/bench/feature-draft-gpu-spec-bench.json",
                    help="an eval-draft JSON: the last result's alpha and c are today's model")
    ap.add_argument("--alphas", default="0.5,0.6,0.7", help="comma-separated alphas of a stronger draft model")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="write the JSON here (and the table beside it as .md)")
    args = ap.parse_args(argv)
    if args.max_new_tokens < 2 or args.threads < 1:
        print("error: --max-new-tokens must be >= 2 and --threads >= 1", file=sys.stderr)
        return 2
    try:
        extra = [float(a) for a in args.alphas.split(",") if a.strip()]
    except ValueError:
        extra = [-1.0]
    if any(not 0.0 <= a < 1.0 for a in extra):
        print(f"error: --alphas must be comma-separated numbers in [0, 1) (got {args.alphas!r})", file=sys.stderr)
        return 2
    try:
        from decoding.eval.bench.ceiling import read_replay_inputs

        bench, evaluation, cost = read_replay_inputs(args.bench, args.draft_eval, args.verify_cost, args.dtype)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    missing = [c for c in CATEGORIES if "autoregressive" not in bench["categories"].get(c, {})]
    if missing:
        print(f"error: {args.bench} has no autoregressive row for {missing}", file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.ceiling import Replay, markdown, needed_decode_speedup, replay, runs_by_match, whole_runs
    from decoding.run.pair import load_pair
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    torch.set_num_threads(args.threads)
    target, _ = load_pair("default", "prompt-lookup", dtype=args.dtype)
    chat = bench["settings"].get("chat", True)
    outputs = []  # (category, sequence, prompt length)
    started = time.time()
    for row in read_prompt_rows(args.prompts):
        if row.category not in CATEGORIES:
            continue
        ids = target.encode_prompt(row.prompt, chat)
        config = RunConfig(method="autoregressive", max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(0.0),
                           stop_at_eos=False, lean=True, chat=chat)
        emitted = [t.token_id for r in decode(target, None, ids, config) for t in r.emitted]
        outputs.append((row.category, list(ids) + emitted, len(ids)))
    decode_seconds = time.time() - started

    table = []
    for key, name, rule, model in rules(evaluation["alpha"], evaluation["c"], extra):
        parts = {category: Replay() for category in CATEGORIES}
        for cat, sequence, prompt_length in outputs:
            parts[cat].add(replay(sequence, prompt_length, rule, cost, model))
        table.append({"key": key, "rule": name, **whole_runs(parts, bench)})
    needed = {c: needed_decode_speedup(1.7, bench["categories"][c]["autoregressive"]["first_pass_share"])
              for c in ("summarization", "rag")}
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": display_command("python experiments/copy_ceiling.py", argv or sys.argv[1:]),
        "prompts": len(outputs), "categories": list(CATEGORIES), "max_new_tokens": args.max_new_tokens,
        "dtype": args.dtype, "threads": args.threads,
        "decode_seconds": decode_seconds, "bench": args.bench, "verify_cost": args.verify_cost,
        "draft_eval": {"file": args.draft_eval, "draft": evaluation.get("draft"), "alpha": evaluation["alpha"],
                       "c": evaluation["c"]},
        "prefill_share": {c: bench["categories"][c]["autoregressive"]["first_pass_share"] for c in CATEGORIES},
        "needed_after_prefill_for_1_7x": needed,
        "copy_by_match": COPY_BY_MATCH,
        "runs_by_match": runs_by_match([(sequence, n) for _, sequence, n in outputs], [1, *COPY_BY_MATCH]),
        "rows": table,
    }
    text = markdown(result)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        Path(args.out).with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
