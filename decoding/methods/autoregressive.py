"""The baseline: one target forward pass per token, with a KV cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


from ..lm.backend import make_lm, run_capacity
from ..lm.cached_lm import CachedLM
from .settings import MethodSettings
from ..trace.record import TARGET, IterationRecord
from ..rules.draw import draw
from ..rules.warp import warp_logits
from .base import RunConfig, RunState, raw_logprobs


@dataclass
class AutoregressiveSettings(MethodSettings):
    """Plain decoding has no settings of its own (gamma and lenience do not apply)."""


def autoregressive(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    """Yield one record per generated token; `drafter` is ignored (kept for a uniform signature)."""
    AutoregressiveSettings.from_config(config)
    return _autoregressive(target, prompt_ids, config, meter)


def _autoregressive(target, prompt_ids: list[int], config: RunConfig, meter) -> Iterator[IterationRecord]:
    state = RunState("autoregressive", target, prompt_ids, config, meter)
    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size, capacity=run_capacity(prompt_ids, config))
    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)
        with state.timed("verify"):
            logits = lm.extend(state.sequence, keep=1)[-1]
        # greedy lean runs need no distribution: p is only read by the trace's top-k lists
        p = None if config.lean and config.sampling.greedy else warp_logits(logits, config.sampling)
        x = int(logits.argmax()) if config.sampling.greedy else draw(p, state.generator)
        emitted = state.commit([state.token(x, TARGET)], raw_logprobs(logits[None], [x]))
        yield state.record(
            context_length=context_length,
            gamma=0,
            draft=[],
            accepted_length=0,
            emitted=emitted,
            residual=None,
            next_top=state.top_candidates(p),
            tree=[],
            target_calls=lm.calls,
        )
