"""Our engine's runs in the benchmark: one prompt decoded with the lean trace, reduced to RunStats."""

from __future__ import annotations

import time

from ...methods.registry import METHODS
from ...trace.metrics import PositionTally, RunCounts
from .variants import GAMMA_SCHEDULES, RunStats, Variant


def timed_run(records) -> tuple[list, RunCounts]:
    """Run a trace generator to its end: its records and their counts, with the wall time and the
    first iteration's (the prompt's prefill pass, with its tokens) timed apart."""
    t0 = time.perf_counter()
    out, first_seconds = [], 0.0
    for record in records:
        out.append(record)
        if len(out) == 1:
            first_seconds = time.perf_counter() - t0
    counts = RunCounts.from_records(out)
    counts.seconds = time.perf_counter() - t0
    counts.first_pass_seconds = first_seconds
    counts.first_pass_tokens = len(out[0].emitted) if out else 0
    return out, counts


def verified_tokens(record) -> int:
    """Tokens the record's verify pass fed after a decoding step (the last committed token and the draft): a tree
    iteration's `draft` is its accepted path's chain view, shorter than the tree (or chain) it verified, so its
    size is read from the tree step's `drafted` nodes (methods/tree_draft.py); any other record's is its draft."""
    step = record.extra.get("tree_draft")
    drafted = step.get("drafted") if step else None
    return 1 + (drafted if drafted is not None else len(record.draft))


def run_ours(variant: Variant, target, draft, prompt_ids: list[int], args, timing: bool, meter=None) -> RunStats:
    """One run of our engine; timing runs ignore end-of-sequence (fixed token counts)."""
    from ...run.runner import decode
    from ...methods.base import RunConfig

    extra = {"gamma_schedule": variant.schedule} if variant.schedule in GAMMA_SCHEDULES else {}
    if variant.tree:
        extra["draft_tree"] = variant.tree
    config = RunConfig(method=variant.method, max_new_tokens=args.max_new_tokens, sampling=args.sampling,
                       gamma=variant.gamma or 4, seed=args.seed, chat=args.chat, stop_at_eos=not timing, lean=True,
                       extra=extra)
    gen = decode(target, draft, prompt_ids, config, meter if timing else None)
    records, counts = timed_run(gen)
    if not METHODS[variant.method].chain_draft:  # a tree's walked path is not a chain: no per-position counts
        counts.positions = PositionTally()
    stats = RunStats(counts=counts)
    stats.token_ids = [t.token_id for r in records for t in r.emitted]
    stats.joules = records[-1].energy_joules
    lp_sum, lp_n = 0.0, 0
    for i, r in enumerate(records):
        lps = r.extra.get("target_logprobs")
        if lps is not None and lp_sum is not None:
            lp_sum += sum(lps)
            lp_n += len(lps)
        elif r.emitted:
            lp_sum = None
        k = len(r.draft)
        if variant.method != "autoregressive":
            stats.gammas.append(r.gamma)
            stats.full_drafts += int(bool(k) and k == r.gamma)
        if i == 0:
            stats.prefill_seconds = r.timings.verify + r.timings.draft
            continue
        stats.verify_by_size.setdefault(verified_tokens(r), []).append(r.timings.verify)
        if variant.method != "autoregressive":
            stats.trace_sizes.append(k)
    if lp_sum is not None and lp_n:
        stats.logprob_sum, stats.logprob_n = lp_sum, lp_n
    return stats
