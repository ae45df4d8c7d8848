"""Starting a run and reducing its trace to a summary: the one path the CLI, app and tests share.

`decode(...)` returns the strategy's generator (nothing computed twice: readers consume the
records as they come); `summarize(...)` turns the records of a finished run into the summary
line, and `generate(...)` is the blocking call that does both.
"""

from __future__ import annotations

import math
from typing import Iterator

from ..lm import batching
from ..methods.registry import method_spec
from ..lm.backend import describe as describe_backend
from ..lm.devices import dtype_name
from ..trace.metrics import RunCounts
from ..lm.models import LoadedModel
from .pair import as_draft
from ..methods.base import RunConfig
from ..trace.record import IterationRecord, RunSummary


def decode(target: LoadedModel, draft, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    """The trace generator of `config.method` for one run. `draft`: a `pair.Draft` (a LoadedModel,
    "prompt-lookup" or None, meaning prompt lookup, are accepted too); ignored by methods without one."""
    spec = method_spec(config.method)
    drafter = as_draft(draft).drafter(target) if spec.uses_drafter else None
    records = spec(target, drafter, prompt_ids, config, meter)
    return batching.tracked(records) if batching.batcher() is not None else records


def summarize(records: list[IterationRecord], config: RunConfig, prompt: str, target: LoadedModel,
              draft, stop_reason: str | None = None) -> RunSummary:
    """The summary line of a finished (or stopped) run; `draft` as for `decode`."""
    spec = method_spec(config.method)
    draft = as_draft(draft) if spec.uses_drafter else None
    counts = RunCounts.from_records(records, per_position=spec.chain_draft)
    token_ids = [t.token_id for r in records for t in r.emitted]
    last = records[-1] if records else None
    return RunSummary(
        method=config.method,
        prompt=prompt,
        settings=config.as_dict(),
        token_ids=token_ids,
        text=target.tokenizer.decode(token_ids, skip_special_tokens=True),
        iterations=counts.iterations,
        target_calls=counts.target_calls,
        draft_calls=counts.draft_calls,
        mean_accepted=counts.mean_accepted if config.method != "autoregressive" else None,
        tokens_per_call=counts.tokens_per_call,
        tokens_per_second=counts.tokens_per_second,
        wall_seconds=counts.seconds,
        energy_joules=last.energy_joules if last else None,
        energy_note=last.energy_note if last else "no iterations",
        stop_reason=stop_reason or (last.stop_reason if last and last.finished else "stopped"),
        models={
            "target": target.name,
            "draft": draft.name if draft is not None else None,
            # bytes of weights per forward pass: what the weight-bytes-read energy proxy multiplies
            "target_weight_bytes": target.weight_bytes,
            "draft_weight_bytes": draft.weight_bytes if draft is not None else None,
            # the precision of each model: greedy output is reproducible across runs in one precision
            "dtype": dtype_name(target.dtype),
            "draft_dtype": dtype_name(draft.dtype) if draft is not None else None,
            # the KV-cache path the target ran on (lm/backend.py): "dynamic", "static" or
            # "static+cuda-graphs", and why the static path or its graphs were refused, if they were
            **describe_backend(target.model),
        },
        target_perplexity=target_perplexity(records),
        acceptance_per_position=counts.acceptance_per_position,
        acceptance_length_histogram=counts.acceptance_length_histogram,
        mean_acceptance_length=counts.mean_acceptance_length if config.method != "autoregressive" else None,
    )


def target_perplexity(records: list[IterationRecord]) -> float | None:
    """exp(-mean log p_raw) of the emitted tokens under the raw target (temperature 1, unwarped: a
    warped p can be 0), from each record's extra["target_logprobs"]; None if a record lacks them."""
    total, count = 0.0, 0
    for r in records:
        if not r.emitted:
            continue
        values = r.extra.get("target_logprobs")
        if values is None or len(values) != len(r.emitted):
            return None
        total += sum(values)
        count += len(values)
    return math.exp(-total / count) if count else None


def generate(target: LoadedModel, draft, prompt: str, config: RunConfig, meter=None) -> tuple[list[IterationRecord], RunSummary]:
    """Blocking convenience: encode, run to the end, summarize."""
    prompt_ids = target.encode_prompt(prompt, config.chat)
    records = list(decode(target, draft, prompt_ids, config, meter))
    return records, summarize(records, config, prompt, target, draft)
