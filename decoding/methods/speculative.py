"""Speculative sampling, Algorithm 1 of Leviathan et al. (docs/papers.md), with lenience (appendix A.5).

Per iteration:
  Step 1. The drafter proposes up to gamma tokens x_1..x_k, each with the q it was drawn from.
  Step 2. The target scores the uncached context plus x_1..x_k in ONE forward pass, giving
          p_1..p_{k+1} (the first iteration's pass is also the prompt's prefill).
  Step 3. Coins u_i ~ U(0,1); x_i is accepted iff u_i <= min(1, p_i(x_i) / (l q_i(x_i)))
          (greedy: iff p_raw(x_i) >= l max p_raw), stopping at the first rejection.
  Step 4. The next token comes from the residual norm(max(0, p_j - q_j)) at the first rejected
          position j, or from p_{k+1} (the bonus token) when all k drafts were accepted.
  Step 5. Both KV caches are rolled back to the committed sequence, and a record is yielded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from ..rules.acceptance import ChainVerdict, verify_chain
from ..lm.backend import make_lm, run_capacity
from ..lm.cached_lm import CachedLM
from ..drafters.base import Drafter
from ..drafters.gamma_policy import SCHEDULES, GammaPolicy
from .settings import MethodSettings, knob
from ..trace.record import ACCEPTED, BONUS, CORRECTION, DraftToken, IterationRecord, Residual, StepData, TreeNode
from ..rules.draw import draw
from ..rules.warp import warp_logits
from .base import RunConfig, RunState, raw_logprobs

VerifyFn = Callable[..., ChainVerdict]


@dataclass
class ChainSettings(MethodSettings):
    """Settings of every method that verifies one draft chain (speculative, mentored)."""

    gamma_schedule: str = knob(
        "fixed", flag="--gamma-schedule", choices=SCHEDULES, label="γ schedule (fixed: always γ; auto: from α and the costs)",
        what="gamma schedule",
        help="speculative/mentored: fixed gamma, auto (from running alpha and costs; may pick 0), or HF's "
             "heuristic (+2 after a full accept, -1 otherwise); --gamma is the start",
        info="fixed: always γ tokens. auto: chosen at each iteration from the measured acceptance and costs (it may "
             "draft nothing). heuristic: Hugging Face's rule, 2 more after a fully accepted draft, 1 fewer otherwise, "
             "starting from γ.")
    max_gamma: int = field(default=16)  # the automatic schedule's cap (programmatic)


@dataclass
class SpeculativeSettings(ChainSettings):
    """Speculative sampling: gamma and lenience are common settings; the gamma schedule and the draft
    tree are its own."""

    draft_tree: str = knob(
        "off", flag="--draft-tree", choices=("off", "auto", "4,2", "6,3", "8,4", "16,6"), open_choices=True, label="Draft tree (off, auto, or N nodes[,D levels])", what="draft tree",
        help="speculative: draft a tree of the model's guesses instead of a chain: off, auto (this device's "
             "tuned size, else 16 nodes, 6 levels), N or N,D (nodes, depth); copies stay chains",
        info="off: one guess per position (a chain). A tree keeps several guesses per position, the likeliest "
             "continuations of the draft, and the target checks them all in one pass. auto: a size measured for "
             "this computer; or write N or N,D (nodes, levels), e.g. 16,6.")

    def validate(self) -> None:
        super().validate()
        from .tree_draft import parse_draft_tree

        parse_draft_tree(self.draft_tree)


@dataclass
class ChainStep(StepData):
    """Which acceptance rule a chain record's coins and thresholds belong to (record.extra["chain"])."""

    KEY = "chain"
    greedy: bool | None = None  # temperature 0: no coins, accept iff p_raw(x) >= l max p_raw
    lenience: float | None = None
    source: str | None = None  # where this iteration's draft came from: "model" | "lookup"
    match_length: int | None = None  # a lookup's matched suffix length (the hybrid copies from >= its minimum)
    copied: int | None = None  # a model draft continued by a copy: how many of its last tokens were copied


def speculative(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    settings = SpeculativeSettings.from_config(config)  # validate before the first iteration
    if settings.draft_tree.strip().lower() != "off":
        from .tree_draft import tree_loop

        return tree_loop("speculative", target, drafter, prompt_ids, config, meter, settings)
    return chain_loop("speculative", strict_verify, target, drafter, prompt_ids, config, meter, settings)


def strict_verify(state: RunState, p_rows, q_rows, draft: list[int], logits) -> ChainVerdict:
    """Step 3-4 of the strict/lenient rule: coins, the longest passing prefix, the next distribution."""
    greedy = state.config.sampling.greedy
    coins = None if greedy else torch.rand(len(draft), generator=state.generator, device=state.target.device)
    p_raw = torch.softmax(logits[: len(draft)], dim=-1) if greedy and draft else None  # draft rows only
    return verify_chain(p_rows, q_rows, draft, coins, state.config.lenience, p_raw)


def chain_loop(name: str, verify: VerifyFn, target, drafter: Drafter, prompt_ids: list[int], config: RunConfig,
               meter=None, settings: ChainSettings | None = None) -> Iterator[IterationRecord]:
    """Steps 1-5 for any rule that verifies one draft chain; `verify` is Steps 3-4 (strict, mentored, ...).
    The drafter is used through the `Drafter` interface only (drafters/base.py).

    `verify(state, p_rows, q_rows, draft, logits)` returns a ChainVerdict; its `extra` dict goes
    into the record's `extra` (method-specific trace data).
    """
    settings = settings or ChainSettings()
    state = RunState(name, target, prompt_ids, config, meter, drafter)
    lm = make_lm(CachedLM, target.model, target.device, _shared_width(target, drafter),
                 capacity=run_capacity(prompt_ids, config))
    drafter.attach_target(lm)  # a feature draft reads the target's hidden states; other drafters do nothing
    greedy = config.sampling.greedy
    # fixed gamma, or chosen per iteration (gamma_policy.py)
    policy = GammaPolicy(settings.gamma_schedule, config.gamma, max_gamma=settings.max_gamma)

    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)

        # Step 1: draft. The source (model or a copy) and gamma are chosen from the context and
        # earlier iterations only; a copied span may be longer than gamma: never past the room left
        with state.timed("draft"):
            source, asked = policy.choose(drafter.sources(state.sequence))
            gamma = max(0, min(asked, state.room() - 1))
            stopper = policy.draft_stopper() if source is not None and source.kind == "model" else None
            # auto: exactly gamma tokens from the chosen source; fixed: the drafter's own rule
            proposal = (drafter.propose(state.sequence, gamma, config.sampling, state.generator, stopper, source,
                                        exact=policy.schedule == "auto") if gamma else None)
        if proposal is not None:
            proposal = proposal.truncated(max(0, state.room() - 1))
        draft = proposal.tokens if proposal else []
        k = len(draft)

        # Step 2: one target pass over the uncached context and the k draft tokens
        fed, prefill = context_length - lm.length + k, lm.length == 0
        with state.timed("verify"):
            logits = lm.extend(state.sequence, draft, keep=k + 1)
        p_rows = warp_logits(logits, config.sampling)
        q_rows = proposal.q_rows if proposal else p_rows[:0]

        # Step 3-4: coins, accept the longest passing prefix, pick the next distribution
        verdict = verify(state, p_rows, q_rows, draft, logits)
        p_raw = verdict.p_raw_rows  # reuse the rows the greedy rule already computed
        if p_raw is None and greedy and k:
            p_raw = torch.softmax(logits[:k], dim=-1)  # only draft rows are read
        n = verdict.n_accepted
        nxt = verdict.next_distribution
        y = int(nxt.argmax()) if greedy else draw(nxt, state.generator)

        # Step 5: commit, roll both caches back to the committed prefix
        emitted = [state.token(x, ACCEPTED) for x in draft[:n]]
        emitted.append(state.token(y, BONUS if verdict.next_is_bonus else CORRECTION))
        emitted = state.commit(emitted, raw_logprobs(logits, draft[:n] + [y]))
        lm.rollback(context_length + n)
        drafter.rollback(context_length + n)

        record = state.record(
            context_length=context_length,
            gamma=gamma,
            draft=_draft_tokens(state, draft, p_rows, q_rows, verdict, p_raw, proposal),
            accepted_length=n,
            emitted=emitted,
            residual=None if verdict.next_is_bonus else _residual(state, nxt, y, verdict),
            next_top=state.top_candidates(nxt),
            tree=_chain_tree(state, context_length, draft, verdict.accepted),
            target_calls=lm.calls,
            extra={ChainStep.KEY: ChainStep(greedy, config.lenience, proposal.source if proposal else None,
                                            proposal.match_length if proposal else None,
                                            proposal.copied if proposal and proposal.copied else None).to_dict(),
                   **verdict.extra},
        )
        if policy.schedule != "fixed":
            # the chosen source's own tokens only: a copy that continued a model draft is a free extra
            own = k - (proposal.copied if proposal else 0)
            policy.update(gamma, own, min(n, own), [d.overlap for d in record.draft[:own] if d.accepted is not None],
                          record.timings.draft - (proposal.catch_up_seconds if proposal else 0.0),
                          record.timings.verify, fed, prefill,
                          source.key if source is not None else "model")
            record.extra["gamma_policy"] = policy.snapshot()
        yield record


def _shared_width(target, drafter: Drafter) -> int:
    """The vocabulary columns the target is scored over: those the drafter's q rows also have."""
    return min(target.vocab_size, drafter.vocab_width)


def _draft_tokens(state, draft, p_rows, q_rows, verdict, p_raw, proposal) -> list[DraftToken]:
    """The draft's records: p_rows (k + 1, V) warped target rows, q_rows (k, V), p_raw (k, V) unwarped target
    rows (greedy) or None. Every draft position's q(x), p(x) and overlap come from one host read (a GPU
    sync), not three reads per token."""
    k = len(draft)
    if not k:
        return []
    xs = torch.tensor(draft, device=p_rows.device)
    rows = torch.arange(k, device=p_rows.device)
    p_x = (p_raw if p_raw is not None else p_rows)[rows, xs]
    if state.config.sampling.greedy:
        # p and q rows are one-hot (0/1 entries): every summation order gives the same exact overlap
        overlap = torch.minimum(p_rows[:k], q_rows).sum(dim=-1)
    else:  # each row summed on its own, as a lone row's sum is (the same floats to the last bit)
        overlap = torch.stack([torch.minimum(p_rows[i], q_rows[i]).sum() for i in range(k)])
    q_x, p_x, overlap = torch.stack([q_rows[rows, xs].double(), p_x.double(), overlap.double()]).tolist()
    out = []
    for i, x in enumerate(draft):
        out.append(
            DraftToken(
                position=i,
                token_id=x,
                text=state.target.decode_token(x),
                q=q_x[i],
                p=p_x[i],
                coin=verdict.coins[i],
                threshold=verdict.thresholds[i] if i < len(verdict.thresholds) else None,
                accepted=verdict.accepted[i],
                overlap=overlap[i],
                top=state.top_candidates(p_rows[i], q_rows[i]),
                source=proposal.source_of(i) if proposal is not None else None,
            )
        )
    return out


def _residual(state, residual, y, verdict) -> Residual:
    return Residual(
        token_id=y,
        text=state.target.decode_token(y),
        mass=float(verdict.residual_mass),
        fell_back_to_p=verdict.residual_fell_back_to_p,
        top=state.top_candidates(residual),
    )


def _chain_tree(state, context_length, draft, accepted) -> list[TreeNode]:
    """The draft as a chain: root (the last committed token) then one node per draft token."""
    root_id = state.sequence[context_length - 1]
    nodes = [TreeNode(0, -1, root_id, state.target.decode_token(root_id), 0, "root", True)]
    for i, x in enumerate(draft):
        nodes.append(TreeNode(i + 1, i, x, state.target.decode_token(x), i + 1, "draft", bool(accepted[i])))
    return nodes
