"""The PPD table for the README: per tree size, on validation prompts, greedy, fixed token counts.

    python -m decoding.methods.ppd report [--sizes 8,16,32] [--prompts benchmarks/dev.jsonl] [--max-new-tokens 64]

Columns: mean accepted length (accepted candidate tokens per step; the target's own token not
counted), tokens per target call (counted), tokens/s and speedup against our autoregressive
decoding measured in the same run (runs interleaved per prompt), whether every greedy output equals
the autoregressive one, and the memory overhead (bytes of the prompt embeddings against the
model's weights).
"""

from __future__ import annotations

import time


def _run(target, method, ids, n, extra):
    from ..registry import METHODS
    from ..base import RunConfig
    from ...rules.warp import SamplingConfig

    config = RunConfig(method=method, max_new_tokens=n, sampling=SamplingConfig(0.0), stop_at_eos=False, lean=True,
                       extra=extra)
    t0 = time.perf_counter()
    records = list(METHODS[method](target, None, ids, config))
    seconds = time.perf_counter() - t0
    return records, seconds


def ppd_table(target, prompt_ids_list, sizes, max_new_tokens: int = 64, embeddings=None) -> dict:
    from .prompts import load_prompt_tokens

    prompts = load_prompt_tokens(target, embeddings)
    ar_tokens = ar_seconds = 0.0
    ar_out = []
    if prompt_ids_list:  # warm-up, discarded
        _run(target, "autoregressive", prompt_ids_list[0], 4, {})
        _run(target, "ppd", prompt_ids_list[0], 4, {"tree_size": max(sizes), "ppd_embeddings": embeddings})
    rows = {n: {"tokens": 0, "seconds": 0.0, "calls": 0, "accepted": 0, "steps": 0, "equal": True} for n in sizes}
    for ids in prompt_ids_list:
        records, seconds = _run(target, "autoregressive", ids, max_new_tokens, {})
        ar = [t.token_id for r in records for t in r.emitted]
        ar_out.append(ar)
        ar_tokens += len(ar)
        ar_seconds += seconds
        for n in sizes:
            records, seconds = _run(target, "ppd", ids, max_new_tokens, {"tree_size": n, "ppd_embeddings": embeddings})
            out = [t.token_id for r in records for t in r.emitted]
            row = rows[n]
            row["tokens"] += len(out)
            row["seconds"] += seconds
            row["calls"] += records[-1].target_calls
            row["accepted"] += sum(r.accepted_length for r in records[1:])
            row["steps"] += len(records) - 1  # the prefill step has no candidates
            row["equal"] &= out == ar
    ar_tps = ar_tokens / ar_seconds if ar_seconds else 0.0
    table = []
    for n in sizes:
        row = rows[n]
        tps = row["tokens"] / row["seconds"] if row["seconds"] else 0.0
        table.append({"tree_size": n,
                      "mean_accepted": row["accepted"] / row["steps"] if row["steps"] else 0.0,
                      "tokens_per_call": row["tokens"] / row["calls"] if row["calls"] else 0.0,
                      "tokens_per_second": tps, "speedup": tps / ar_tps if ar_tps else 0.0,
                      "greedy_equal": row["equal"]})
    return {"target": target.name, "device": str(target.device), "embeddings": prompts.source,
            "trained": bool(prompts.trained), "prompts": len(prompt_ids_list), "max_new_tokens": max_new_tokens,
            "ar_tokens_per_second": ar_tps, "embedding_bytes": prompts.nbytes(), "model_bytes": target.weight_bytes,
            "rows": table}


def markdown(result: dict) -> str:
    overhead = result["embedding_bytes"] / result["model_bytes"] if result["model_bytes"] else 0.0
    lines = [f"PPD on {result['target']} ({result['device']}), {result['prompts']} prompts x "
             f"{result['max_new_tokens']} tokens, greedy; embeddings: {result['embeddings']}; "
             f"autoregressive {result['ar_tokens_per_second']:.2f} tokens/s; memory overhead "
             f"{result['embedding_bytes']} B of {result['model_bytes']} B ({100 * overhead:.5f}%).", "",
             "| tree size | mean accepted length | tokens / target call | tokens/s | speedup vs AR | greedy = AR |",
             "|---:|---:|---:|---:|---:|:---:|"]
    for r in result["rows"]:
        lines.append(f"| {r['tree_size']} | {r['mean_accepted']:.2f} | {r['tokens_per_call']:.2f} | "
                     f"{r['tokens_per_second']:.2f} | {r['speedup']:.2f}x | {'yes' if r['greedy_equal'] else 'NO'} |")
    return "\n".join(lines)


def load_prompt_ids(target, path, limit: int | None = None) -> list[list[int]]:
    from ...lm.prompt_files import read_prompts

    return [target.encode_prompt(p, True) for p in read_prompts(path)[:limit]]
