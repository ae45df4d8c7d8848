"""Mentored decoding (Tran-Thien, docs/papers.md): speculative sampling whose per-token rule maximizes acceptance
subject to KL(p || output) <= D (the derivation, in our notation, is in `decoding/rules/mentored.py`).

The loop is speculative sampling's (`speculative.chain_loop`, Steps 1, 2 and 5); only Steps 3-4
differ: each draft token x_i is accepted iff u_i <= r_i(x_i), the mentored acceptance probability,
and after the first rejection the next token is drawn from the mentored residual s_i. The post's
shortcuts apply: a coin that passes the strict threshold min(1, p/q) accepts without a search, and
a position with KL(p || q) <= D accepts directly. The bonus token after a fully accepted draft
comes from p, as in the strict rule.

D = 0 delegates to the strict rule itself, so it reproduces `speculative` token for token (same
coins, same residual). At temperature 0 (p, q one-hot, see `decoding/rules/mentored.py`) a draft token
that is not the target's argmax is accepted with probability 1 - exp(-D), using the run's seeded
coins; D = 0 is exactly greedy speculative decoding.

Trace: record.extra["mentored"] is a `MentoredStep`: D and, per examined draft position (outside
lean mode), the strict threshold and the mentored one, which rule decided, the strict alpha
(sum min(p, q)) and the mentored alpha, KL(p || q) and KL(p || pi) of the mentored output
distribution pi, and the top of pi next to p and q.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Iterator

import torch

from ..rules.acceptance import ChainVerdict
from ..rules.mentored import kl_divergence, mentored_decide
from .settings import knob
from ..trace.plain import ByName, MayBeInfinite
from ..trace.record import IterationRecord, StepData
from .base import RunConfig, RunState
from .speculative import ChainSettings, chain_loop, strict_verify


@dataclass
class MentoredSettings(ChainSettings):
    lenience_note = "mentored decoding replaces lenience: leave lenience at 1 and set the KL bound"

    kl_bound: float = knob(
        0.0, flag="--kl-bound", minimum=0.0, ui_maximum=2.0, step=0.01, app_default=0.1,
        label="KL bound D (mentored)", what="the KL bound D",
        help="mentored: D >= 0, the bound on KL(p_target || output) per token; 0 is exact")


@dataclass
class OutputCandidate(ByName):
    """One token of the mentored panel's top list: p, q and the mentored output pi."""

    token_id: int = 0
    text: str = ""
    p: float = 0.0
    q: float = 0.0
    output: float = 0.0


@dataclass
class MentoredPosition(ByName):
    """What the mentored panel shows for one examined draft position."""

    position: int = 0
    strict_threshold: float | None = None  # min(1, p(x)/q(x))
    threshold: float | None = None  # the mentored acceptance probability r(x) compared with the coin
    rule: str = ""  # strict-pass | within-bound | search | strict
    strict_alpha: float | None = None  # acceptance probability of the strict rule here
    alpha: float | None = None  # acceptance probability of the mentored rule here
    kl_draft: MayBeInfinite | None = None  # KL(p || q): infinite where q misses p's support
    kl_to_target: MayBeInfinite | None = None  # KL(p || pi) of the mentored output (<= D)
    output_top: list[OutputCandidate] = field(default_factory=list)


@dataclass
class MentoredStep(StepData):
    KEY = "mentored"
    kl_bound: float | None = None
    positions: list[MentoredPosition] = field(default_factory=list)


def mentored(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    settings = MentoredSettings.from_config(config)  # validate before the first iteration
    verify = partial(mentored_verify, kl_bound=settings.kl_bound)
    return chain_loop("mentored", verify, target, drafter, prompt_ids, config, meter, settings)


def mentored_verify(state: RunState, p_rows, q_rows, draft: list[int], logits, kl_bound: float) -> ChainVerdict:
    """Steps 3-4 with the mentored rule; strict when D = 0."""
    lean = state.config.lean
    if kl_bound == 0:
        verdict = strict_verify(state, p_rows, q_rows, draft, logits)
        if not lean:
            examined = [i for i, a in enumerate(verdict.accepted) if a is not None]
            verdict.extra[MentoredStep.KEY] = MentoredStep(0.0, [
                _position_info(state, i, p_rows[i], q_rows[i], verdict.thresholds[i], verdict.thresholds[i], "strict")
                for i in examined]).to_dict()
        return verdict

    k = len(draft)
    # coins are drawn even at temperature 0: the rule is random there too (1 - exp(-D), see module doc)
    coins = torch.rand(k, generator=state.generator, device=state.target.device).tolist()
    thresholds: list[float] = []
    accepted: list[bool | None] = [None] * k
    positions = []
    for i, x in enumerate(draft):
        p_i, q_i = p_rows[i], q_rows[i]
        decision = mentored_decide(p_i, q_i, x, coins[i], kl_bound, always_solve=not lean)
        shown = decision.strict_threshold if decision.threshold is None else max(decision.threshold, decision.strict_threshold)
        thresholds.append(shown)
        accepted[i] = decision.accepted
        if not lean:
            positions.append(_position_info(state, i, p_i, q_i, decision.strict_threshold, shown, decision.rule,
                                            decision))
        if not decision.accepted:
            residual = decision.solution.s.to(p_i.dtype)
            return ChainVerdict(
                n_accepted=i, thresholds=thresholds, coins=coins[: i + 1] + [None] * (k - i - 1),
                accepted=accepted, next_distribution=residual, next_is_bonus=False,
                residual_mass=1.0 - decision.solution.acceptance, residual_fell_back_to_p=False,
                extra={MentoredStep.KEY: MentoredStep(kl_bound, positions).to_dict()} if not lean else {},
            )
    return ChainVerdict(
        n_accepted=k, thresholds=thresholds, coins=coins, accepted=accepted, next_distribution=p_rows[k],
        next_is_bonus=True, extra={MentoredStep.KEY: MentoredStep(kl_bound, positions).to_dict()} if not lean else {},
    )


def _position_info(state, i, p, q, strict_threshold, threshold, rule, decision=None) -> MentoredPosition:
    """What the app's mentored panel shows for one draft position (strict vs mentored acceptance, pi vs p)."""
    if decision is not None and decision.solution is not None:
        pi, alpha, kl_out = decision.output, decision.solution.acceptance, decision.solution.kl
    else:
        pi, alpha, kl_out = p, float(torch.minimum(p, q).sum()), 0.0
    k = min(state.config.trace_top_k, p.shape[-1])
    ids = torch.cat([torch.topk(p, k).indices, torch.topk(q, k).indices, torch.topk(pi.to(p.dtype), k).indices]).unique()
    top = sorted(
        (OutputCandidate(int(t), state.target.decode_token(int(t)), float(p[t]), float(q[t]), float(pi[t]))
         for t in ids.tolist()),
        key=lambda c: -max(c.p, c.q, c.output),
    )
    return MentoredPosition(
        position=i,
        strict_threshold=strict_threshold,
        threshold=threshold,
        rule=rule,
        strict_alpha=float(torch.minimum(p, q).sum()),
        alpha=alpha,
        kl_draft=kl_divergence(p, q) if decision is None or decision.kl_pair is None else decision.kl_pair,
        kl_to_target=kl_out,
        output_top=top,
    )
