"""Hardware-aware tree size (PPD paper, section 4.2): Speedup(n) = T(n) / L(n), measured here.

  L(n)  forward latency of one PPD step with a tree of size n on THIS device;
  T(n)  tokens per step (accepted candidates + the one target token) at tree size n, from
        validation prompts (the paper's tau(n); not MJSD's tau);
  n*    = argmax_n T(n) / L(n), the default tree size of `--method ppd` on this device once tuned.

`python -m decoding.methods.ppd tune` measures both and stores n* in the tuning cache (`tuning.py`).
"""

from __future__ import annotations

import statistics
import time

import torch

from ...lm.devices import sync
from .engine import lm_tree_forward
from .tree import dynamic_trees, tree_buffers


@torch.inference_mode()
def measure_latency(target, prompts, sizes, context: int = 64, reps: int = 11) -> dict[int, float]:
    """Median seconds of one PPD forward pass (state-m tree of each size) over a cached context of
    `context` tokens; the cache is compacted back after every pass.

    The sizes are timed round-robin (one pass of each size per round, the starting size rotating),
    so a burst of noise on a shared machine lands on every size instead of on the one being timed;
    a size-by-size loop let one noisy stretch flip n* between runs."""
    from ...lm.backend import make_lm
    from ...lm.cached_lm import CachedLM

    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size, capacity=context + max(sizes) * 4)
    ids = [int(target.tokenizer.eos_token_id or 0)] * context
    lm.forward(ids[:-1])
    sizes = [int(n) for n in sizes]
    passes = {}
    for n in sizes:
        buffers = tree_buffers(dynamic_trees(n, prompts.m, prompts.ept).trees[prompts.m], prefix_length=context - 1,
                               ept=prompts.ept)
        passes[n] = (buffers, [ids[-1]] * (1 + buffers.n_candidates))

    def one_pass(n: int) -> float:
        buffers, tree_ids = passes[n]
        sync(target.device)
        t0 = time.perf_counter()
        lm_tree_forward(lm, [], tree_ids, buffers, prompts)
        sync(target.device)
        elapsed = time.perf_counter() - t0
        lm.compact(context - 1, [])
        return elapsed

    for n in sizes:  # warm-up pass of every size, not timed
        one_pass(n)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(max(1, reps)):
        start = rep % len(sizes)
        for n in sizes[start:] + sizes[:start]:
            times[n].append(one_pass(n))
    return {n: statistics.median(times[n]) for n in sizes}


def tokens_per_step(target, prompt_ids_list, sizes, max_new_tokens: int = 32, embeddings=None,
                    acceptance=None) -> tuple[dict[int, float], list]:
    """T(n): emitted tokens / PPD steps (prefill step excluded) over greedy runs on the prompts.
    Also returns the records of the largest size (for the acceptance table)."""
    from ..base import RunConfig
    from .generator import ppd
    from ...rules.warp import SamplingConfig

    out, records_last = {}, []
    for n in sizes:
        tokens = steps = 0
        runs = []
        for ids in prompt_ids_list:
            config = RunConfig(method="ppd", max_new_tokens=max_new_tokens, sampling=SamplingConfig(0.0),
                               lean=True, stop_at_eos=True,
                               extra={"tree_size": n, "ppd_embeddings": embeddings, "ppd_acceptance": acceptance})
            records = list(ppd(target, None, ids, config))
            runs.append(records)
            for r in records[1:]:  # the first step is the prefill (no candidates yet)
                tokens += len(r.emitted)
                steps += 1
        out[int(n)] = tokens / steps if steps else 1.0
        records_last = runs
    return out, records_last


def acceptance_table(runs, m: int, ranks: int = 10) -> list[list[float]]:
    """P(rank-r prompt guess at distance d is the token actually emitted there), from PPD runs'
    records (PPDStep.next_predictions of each step vs the tokens emitted after its last one)."""
    from .generator import PPDStep

    hits = [[0] * ranks for _ in range(m)]
    total = [0] * m
    for records in runs:
        tokens = [t.token_id for r in records for t in r.emitted]
        end = 0
        for r in records:
            end += len(r.emitted)  # tokens[end - 1] is this step's target token (next root)
            for d, ids in enumerate(PPDStep.of(r).next_predictions[:m]):
                pos = end + d  # distance d + 1 beyond the last accepted node = d after the root
                if pos >= len(tokens):
                    break
                total[d] += 1
                if tokens[pos] in ids[:ranks]:
                    hits[d][ids.index(tokens[pos])] += 1
    return [[h / total[d] if total[d] else 0.0 for h in hits[d]] for d in range(m)]


def choose_tree_size(latency: dict[int, float], tokens: dict[int, float]) -> tuple[int, dict[int, float]]:
    """n* = argmax T(n) / L(n) over the sizes measured for both; returns n* and the speedup curve
    normalized to the smallest size's latency (a relative Speedup(n))."""
    sizes = sorted(set(latency) & set(tokens))
    if not sizes:
        raise ValueError("no tree size has both a latency and a tokens-per-step measurement")
    base = latency[sizes[0]]
    curve = {n: tokens[n] / latency[n] * base for n in sizes}
    return max(sizes, key=lambda n: (curve[n], -n)), curve


