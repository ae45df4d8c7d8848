"""A toy decoding method that lives only in the tests: one registry entry (`TOY`) and this file, to show
that a method added this way shows in the CLI and the app without a change to either.

"toy" is plain decoding (one target call per token, greedy or sampled as the run's sampling says) that
also records, per iteration, its own trace data (`ToyStep`): the chosen token's probability, its margin
over the runner-up, and whether it clears the method's one setting, a probability floor (`--toy-floor`).
Its view names a panel kind the app has no renderer for, so the app shows the trace data as a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from decoding.lm.cached_lm import CachedLM
from decoding.methods.base import RunConfig, RunState, raw_logprobs
from decoding.methods.registry import MethodSpec, MethodView
from decoding.methods.settings import MethodSettings, knob
from decoding.rules.warp import warp_logits
from decoding.trace.record import TARGET, IterationRecord, StepData

NAME = "toy"
FLOOR_LABEL = "Toy floor (probability the chosen token should clear)"


@dataclass
class ToySettings(MethodSettings):
    toy_floor: float = knob(0.5, flag="--toy-floor", minimum=0.0, maximum=1.0, step=0.05, label=FLOOR_LABEL,
                            help="record whether each chosen token's probability is at least this floor",
                            what="the toy floor")


@dataclass
class ToyStep(StepData):
    """record.extra["toy"]: the chosen token's probability p(x), its margin over the runner-up, the floor."""

    KEY = "toy"
    chosen_p: float | None = None
    margin: float | None = None
    floor: float | None = None
    above_floor: bool | None = None


def toy(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    """Check the settings, then yield one record per generated token; `drafter` is ignored."""
    settings = ToySettings.from_config(config)
    return _toy(target, prompt_ids, config, meter, settings.toy_floor)


def _toy(target, prompt_ids, config: RunConfig, meter, floor: float) -> Iterator[IterationRecord]:
    state = RunState(NAME, target, prompt_ids, config, meter)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)
        with state.timed("verify"):
            logits = lm.extend(state.sequence, keep=1)[-1]
        p = warp_logits(logits, config.sampling)  # (vocab,)
        x = int(logits.argmax()) if config.sampling.greedy else int(torch.multinomial(p, 1, generator=state.generator))
        best, runner_up = (float(v) for v in torch.topk(p.float(), 2).values)
        chosen = float(p[x])
        data = ToyStep(chosen, chosen - (runner_up if chosen >= best else best), floor, chosen >= floor)
        emitted = state.commit([state.token(x, TARGET)], raw_logprobs(logits[None], [x]))
        yield state.record(context_length=context_length, gamma=0, draft=[], accepted_length=0, emitted=emitted,
                           residual=None, next_top=state.top_candidates(p), tree=[], target_calls=lm.calls,
                           extra={ToyStep.KEY: data.to_dict()})


TOY = MethodSpec(NAME, toy, ToySettings, "toy decoding: plain decoding that records each token's probability margin",
                 title="Toy", trace_data=ToyStep, view=MethodView(panel="margins"))


def register(setitem) -> None:
    """Put the toy into the registry: `setitem(mapping, key, value)` (monkeypatch.setitem in a test, which
    undoes it afterwards; a plain assignment in a process of its own)."""
    from decoding.methods.registry import METHODS, STEP_DATA

    setitem(METHODS, NAME, TOY)
    setitem(STEP_DATA, ToyStep.KEY, ToyStep)
