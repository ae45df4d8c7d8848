"""Starting a run and reducing its trace to a summary: the one path the CLI, app and tests share.

`decode(...)` returns the strategy's generator (nothing computed twice: readers consume the
records as they come); `summarize(...)` turns the records of a finished run into the summary
line, and `generate(...)` is the blocking call that does both.
"""

from __future__ import annotations

import math
from typing import Iterator

from .drafters import PROMPT_LOOKUP, ModelDrafter, PromptLookupDrafter
from .models import LoadedModel, check_same_vocabulary
from .strategies import METHODS, USES_DRAFTER, RunConfig
from .trace import IterationRecord, RunSummary


def make_drafter(target: LoadedModel, draft: LoadedModel | str | None):
    """A fresh drafter (drafters hold per-run KV caches): a draft LM or prompt lookup."""
    if draft is None or draft == PROMPT_LOOKUP:
        return PromptLookupDrafter(target.vocab_size, target.device)
    if isinstance(draft, str):
        raise ValueError(f"unknown draft {draft!r}: load it with decoding.models.load_model first")
    check_same_vocabulary(target, draft)
    width = min(target.vocab_size, draft.vocab_size)
    return ModelDrafter(draft.model, draft.device, width, draft.name)


def decode(target: LoadedModel, draft, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    """The trace generator of `config.method` for one run."""
    if config.method not in METHODS:
        raise ValueError(f"unknown method {config.method!r}; choose one of: {', '.join(METHODS)}")
    drafter = make_drafter(target, draft) if config.method in USES_DRAFTER else None
    return METHODS[config.method](target, drafter, prompt_ids, config, meter)


def summarize(records: list[IterationRecord], config: RunConfig, prompt: str, target: LoadedModel,
              draft: "LoadedModel | str | None", stop_reason: str | None = None) -> RunSummary:
    """`draft` is the draft model, or its name ("prompt-lookup") when it has no weights."""
    draft_name = getattr(draft, "name", draft)
    uses_draft = config.method in USES_DRAFTER
    token_ids = [t.token_id for r in records for t in r.emitted]
    drafted = [r for r in records if r.draft]
    last = records[-1] if records else None
    wall = last.elapsed if last else 0.0
    target_calls = last.target_calls if last else 0
    return RunSummary(
        method=config.method,
        prompt=prompt,
        settings=config.as_dict(),
        token_ids=token_ids,
        text=target.tokenizer.decode(token_ids, skip_special_tokens=True),
        iterations=len(records),
        target_calls=target_calls,
        draft_calls=last.draft_calls if last else 0,
        mean_accepted=(sum(r.accepted_length for r in drafted) / len(drafted))
        if config.method != "autoregressive" and drafted else None,
        tokens_per_call=len(token_ids) / target_calls if target_calls else 0.0,
        tokens_per_second=len(token_ids) / wall if wall > 0 else 0.0,
        wall_seconds=wall,
        energy_joules=last.energy_joules if last else None,
        energy_note=last.energy_note if last else "no iterations",
        stop_reason=stop_reason or (last.stop_reason if last and last.finished else "stopped"),
        models={
            "target": target.name,
            "draft": draft_name if uses_draft else None,
            # bytes of weights per forward pass: what the weight-bytes-read energy proxy multiplies
            "target_weight_bytes": target.weight_bytes,
            "draft_weight_bytes": getattr(draft, "weight_bytes", 0) if uses_draft else None,
        },
        target_perplexity=target_perplexity(records),
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
    return records, summarize(records, config, prompt, target, draft or "prompt-lookup")
