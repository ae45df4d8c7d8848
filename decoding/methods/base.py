"""What every strategy shares: the run settings and the bookkeeping of one decoding run.

A strategy is a generator `method(target, drafter, prompt_ids, config, meter)` that yields one
`IterationRecord` per iteration. `RunState` keeps the committed sequence, the counters, the clock
and the energy meter, cuts the output at end-of-sequence or max-new-tokens, and builds records,
so each strategy's own file holds only its algorithm.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from ..errors import keyed
from ..rules.acceptance import validate_lenience
from ..lm.devices import sync
from ..drafters.gamma_policy import MAX_GAMMA
from ..trace.record import Candidate, EmittedToken, IterationRecord, Timings
from ..rules.warp import SamplingConfig


@dataclass
class RunConfig:
    """Settings of one run. Method-specific knobs live here too so one object describes a run."""

    method: str = "speculative"
    max_new_tokens: int = 64
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    gamma: int = 4
    lenience: float = 1.0
    seed: int = 0
    chat: bool = False
    stop_at_eos: bool = True
    lean: bool = False  # skip top-k lists: for timing runs
    trace_top_k: int = 8
    extra: dict = field(default_factory=dict)  # knobs of later methods (kl_bound, beams, tau, ...)

    def __post_init__(self) -> None:
        if int(self.gamma) != self.gamma or not (1 <= self.gamma <= MAX_GAMMA):
            raise keyed(f"gamma must be a whole number from 1 to {MAX_GAMMA} (got {self.gamma})", "settings.gamma",
                        limit=MAX_GAMMA, value=self.gamma)
        if int(self.max_new_tokens) != self.max_new_tokens or self.max_new_tokens < 1:
            raise keyed(f"max-new-tokens must be a whole number >= 1 (got {self.max_new_tokens})",
                        "settings.max_new_min", value=self.max_new_tokens)
        validate_lenience(self.lenience)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["sampling"] = self.sampling.as_dict()
        return data


def raw_logprobs(logits: torch.Tensor, tokens: list[int]) -> list[float]:
    """log softmax(logits[i])[tokens[i]]: the raw target's (temperature 1, unwarped) log-probabilities
    of the emitted tokens, read off logits the strategy already has (no extra forward pass)."""
    if not tokens:
        return []
    rows = logits[: len(tokens)].float().log_softmax(dim=-1)
    # picked by host indices (views) and read at once: no index tensor copied to the device
    if len(tokens) == 1:
        return [rows[0, tokens[0]].item()]
    return torch.stack([rows[i, t] for i, t in enumerate(tokens)]).tolist()


class RunState:
    def __init__(self, method: str, target, prompt_ids: list[int], config: RunConfig, meter=None, drafter=None):
        self.method = method
        self.target = target
        self.config = config
        self.meter = meter
        self.drafter = drafter
        self.sequence = list(prompt_ids)
        self.prompt_length = len(prompt_ids)
        self.eos_ids = set(target.eos_token_ids(config.chat)) if config.stop_at_eos else set()
        self.generator = torch.Generator(device=target.device).manual_seed(config.seed)
        self.iteration = 0
        self.finished = False
        self.stop_reason = ""
        self.elapsed = 0.0
        self.max_length = target.max_context
        self._tic = 0.0
        self.timings = Timings()
        self.pending_logprobs: list[float] | None = None
        if len(prompt_ids) == 0:
            raise keyed("the prompt is empty", "settings.prompt_empty")
        if len(prompt_ids) >= self.max_length:
            raise keyed(f"the prompt is {len(prompt_ids)} tokens long; the model's context is {self.max_length} tokens",
                        "settings.prompt_context", length=len(prompt_ids), context=self.max_length)
        if meter is not None:
            meter.begin()

    # --- timing -----------------------------------------------------------------------------
    def start_iteration(self) -> None:
        self.timings = Timings()
        sync(self.target.device)
        self._tic = time.perf_counter()

    def timed(self, part: str):
        """Context manager adding the wall time of a block to this iteration's `part`."""
        return _Stopwatch(self, part)

    @property
    def generated(self) -> int:
        return len(self.sequence) - self.prompt_length

    def room(self) -> int:
        """How many more tokens may still be emitted."""
        return min(self.config.max_new_tokens - self.generated, self.max_length - len(self.sequence))

    # --- committing tokens ----------------------------------------------------------------------
    def commit(self, emitted: list[EmittedToken], logprobs: list[float] | None = None) -> list[EmittedToken]:
        """Append tokens, cutting at the first end-of-sequence and at the length limits.

        `logprobs[i]` is log p_raw(emitted[i]) under the raw target (temperature 1, no top-k/top-p);
        the kept ones go into the next record's extra["target_logprobs"] (target perplexity).
        """
        kept = self._commit(emitted)
        if logprobs is not None:
            self.pending_logprobs = [float(v) for v in logprobs[: len(kept)]]
        return kept

    def _commit(self, emitted: list[EmittedToken]) -> list[EmittedToken]:
        kept = []
        for token in emitted:
            if self.room() <= 0:
                break
            kept.append(token)
            self.sequence.append(token.token_id)
            if token.token_id in self.eos_ids:
                self.finished, self.stop_reason = True, "eos"
                break
        if not self.finished and self.room() <= 0:
            self.finished = True
            self.stop_reason = (
                "max_new_tokens" if self.generated >= self.config.max_new_tokens else "context"
            )
        return kept

    def token(self, token_id: int, kind: str) -> EmittedToken:
        return EmittedToken(token_id, self.target.decode_token(token_id), kind)

    def top_candidates(self, p: torch.Tensor, q: torch.Tensor | None = None) -> list[Candidate]:
        """Union of the top-k tokens of p and of q at one position, with both probabilities."""
        if self.config.lean:
            return []
        k = min(self.config.trace_top_k, p.shape[-1])
        ids = torch.topk(p, k).indices
        if q is not None:
            ids = torch.cat([ids, torch.topk(q, k).indices]).unique()
        ids_list = ids.tolist()
        p_values = p[ids].tolist()
        q_values = q[ids].tolist() if q is not None else [None] * len(ids_list)
        cands = [
            Candidate(i, self.target.decode_token(i), pv, qv)
            for i, pv, qv in zip(ids_list, p_values, q_values)
        ]
        return sorted(cands, key=lambda c: -max(c.p, c.q or 0.0))

    # --- records --------------------------------------------------------------------------------
    def record(self, **fields) -> IterationRecord:
        sync(self.target.device)
        total = time.perf_counter() - self._tic
        self.timings.other = max(0.0, total - self.timings.draft - self.timings.verify)
        self.elapsed += total
        joules, note = None, "no energy meter attached"
        if self.pending_logprobs is not None:
            fields["extra"] = {**fields.get("extra", {}), "target_logprobs": self.pending_logprobs}
            self.pending_logprobs = None
        if self.meter is not None and (self.finished or not self.config.lean):
            # a lean (timing) run reads the meter once, at its end: a reading can cost more than a step
            # (NVML's energy counter on an H200: about 4 ms, where a captured step of the target takes 1.7 ms);
            # other runs read it at every iteration, where the meter may give its last reading again (fresh=False)
            # since its counter updates only about every 100 ms; the last iteration's reading is always new
            reading = self.meter.read(fresh=self.finished)
            joules, note = reading.joules, reading.note
        elif self.meter is not None:
            note = "a timing run reads its energy at its last iteration"
        record = IterationRecord(
            method=self.method,
            iteration=self.iteration,
            timings=self.timings,
            target_calls=fields.pop("target_calls"),
            draft_calls=self.drafter.calls if self.drafter is not None else 0,
            generated=self.generated,
            elapsed=self.elapsed,
            energy_joules=joules,
            energy_note=note,
            finished=self.finished,
            stop_reason=self.stop_reason,
            **fields,
        )
        self.iteration += 1
        return record


class _Stopwatch:
    def __init__(self, state: RunState, part: str):
        self.state, self.part = state, part

    def __enter__(self):
        sync(self.state.target.device)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        sync(self.state.target.device)
        setattr(self.state.timings, self.part, getattr(self.state.timings, self.part) + time.perf_counter() - self.t0)
        return False
