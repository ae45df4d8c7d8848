"""Multi-token joint speculative decoding, MJSD (Qin et al., Algorithm 1; docs/papers.md), one iteration per record:

  Step 1. The draft model runs B beams for gamma steps (beam search; beam sampling optional),
          scoring prefixes by their joint draft likelihood q(x_1..t) (`decoding.methods.mjsd.joint.beam_draft`).
  Step 2. The target scores the uncached context plus the best beam x_1..x_gamma in ONE pass.
  Step 3. Every prefix x_1..x_j is checked: it passes iff min(1, p(x_1..j) / q(x_1..j)) > tau, with
          joint likelihoods after the run's top-k/top-p (temperature 0 reads as temperature 1 for
          them, `decoding.methods.mjsd.joint.likelihood_sampling`). eta = the largest passing j, 0 if none (the
          ratio is not monotone in j; the paper's pseudo-code starts eta at -1 and assigns it a
          token id: we do what its text means).
  Step 4. One token is drawn from the target at position eta + 1 (its argmax at temperature 0);
          x_1..x_eta and that token are emitted.
  Step 5. The target's cache is rolled back to the committed prefix; the draft's single-sequence
          cache never left the committed context (the beams ran on a copy).

MJSD is lossy by design: it does not sample from p. tau = 1 accepts nothing (target-only decoding,
one token per target pass); tau = 0 accepts every prefix the target gives probability > 0, i.e.
all gamma tokens without warping. Temperature 0 means: deterministic beam-search drafts scored by
the temperature-1 joint likelihoods after top-k/top-p, and the target's argmax as the extra token.

Trace: the tree holds every kept beam at every step (kind "beam", score = joint log-likelihood
log q(x_1..t), accepted = on the kept prefix), `draft` is the chosen (best) beam, and
record.extra["mjsd"] is an `MjsdStep`: tau, B, the per-prefix joint log-likelihoods and ratios
against tau, eta and the kept prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import torch

from ...lm.backend import make_lm, run_capacity
from ...lm.cached_lm import CachedLM
from ...drafters.model import ModelDrafter
from .joint import MAX_BEAMS, beam_draft, joint_verify, likelihood_sampling
from ..settings import MethodSettings, knob
from ...trace.plain import ByName, MayBeInfinite
from ...trace.record import ACCEPTED, BONUS, CORRECTION, DraftToken, IterationRecord, StepData, TreeNode
from ...rules.draw import draw
from ...rules.warp import warp_logits
from ..base import RunConfig, RunState, raw_logprobs
from ..speculative import _shared_width


@dataclass
class MjsdSettings(MethodSettings):
    lenience_note = "MJSD has its own threshold tau: leave lenience at 1"

    beams: int = knob(8, flag="--beams", minimum=1, maximum=MAX_BEAMS, step=1, app_default=4,
                      label="Beams B (MJSD)", help=f"mjsd: number of draft beams B, 1..{MAX_BEAMS}")
    tau: float = knob(0.1, flag="--tau", minimum=0.0, maximum=1.0, step=0.01,
                      label="τ: joint-likelihood threshold (MJSD)",
                      help="mjsd: joint-likelihood ratio threshold tau in [0, 1]")
    beam_sample: bool = knob(False, flag="--beam-sample", app=False, label="Beam sampling (MJSD)",
                             help="mjsd: beam sampling instead of beam search")


@dataclass
class MjsdPrefix(ByName):
    """The joint-likelihood check of the chosen beam's prefix x_1..x_length."""

    length: int = 0
    log_p: MayBeInfinite | None = None  # -inf where the target gives a token probability 0
    log_q: MayBeInfinite | None = None
    ratio: float | None = None  # min(1, p(x_1..j) / q(x_1..j))
    passes: bool | None = None  # ratio > tau


@dataclass
class MjsdStep(StepData):
    KEY = "mjsd"
    tau: float | None = None
    beams: int | None = None
    beam_sample: bool | None = None
    likelihood_sampling: dict | None = None  # the sampling settings the joint likelihoods were read under
    prefixes: list[MjsdPrefix] = field(default_factory=list)
    eta: int | None = None  # the longest passing prefix (0: none)
    kept: list[int] = field(default_factory=list)
    chosen_beam: list[int] = field(default_factory=list)


def mjsd(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    settings = MjsdSettings.from_config(config)  # validate before the first iteration
    if not isinstance(drafter, ModelDrafter):
        raise ValueError("MJSD drafts with beam search on a draft model: choose a draft model, not prompt lookup or a feature draft")
    return _mjsd(target, drafter, prompt_ids, config, meter, settings)


def _mjsd(target, drafter: ModelDrafter, prompt_ids, config: RunConfig, meter,
          settings: MjsdSettings) -> Iterator[IterationRecord]:
    beams, tau, sample = settings.beams, settings.tau, settings.beam_sample
    state = RunState("mjsd", target, prompt_ids, config, meter, drafter)
    lm = make_lm(CachedLM, target.model, target.device, _shared_width(target, drafter),
                 capacity=run_capacity(prompt_ids, config))
    greedy = config.sampling.greedy
    warp = likelihood_sampling(config.sampling)
    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)
        gamma = max(0, min(config.gamma, state.room() - 1))

        # Step 1: B beams for gamma steps on the draft model
        with state.timed("draft"):
            drafted = beam_draft(drafter.lm, state.sequence, gamma, beams, config.sampling, state.generator,
                                 sample) if gamma else None
        draft = drafted.tokens if drafted else []
        k = len(draft)

        # Step 2: one target pass over the uncached context and the chosen beam
        with state.timed("verify"):
            logits = lm.extend(state.sequence, draft)[-(k + 1):]
        p_like = warp_logits(logits, warp)  # the distributions of the joint likelihoods

        # Step 3: every prefix against tau; eta = the longest passing one
        p_tokens = [float(p_like[i, x]) for i, x in enumerate(draft)]
        verdict = joint_verify(p_tokens, drafted.log_q if drafted else [], tau)
        eta = verdict.eta

        # Step 4: one token from the target at position eta + 1
        if greedy:
            y = int(logits[eta].argmax())
            nxt = warp_logits(logits[eta], config.sampling)
        else:
            nxt = warp_logits(logits[eta], config.sampling)
            y = draw(nxt, state.generator)

        # Step 5: commit and roll the target back (the draft's cache holds only the old context)
        emitted = [state.token(x, ACCEPTED) for x in draft[:eta]]
        emitted.append(state.token(y, BONUS if eta == k else CORRECTION))
        emitted = state.commit(emitted, raw_logprobs(logits, draft[:eta] + [y]))
        lm.rollback(context_length + eta)
        drafter.rollback(context_length + eta)

        yield state.record(
            context_length=context_length,
            gamma=gamma,
            draft=_draft_tokens(state, draft, p_like, drafted, eta),
            accepted_length=eta,
            emitted=emitted,
            residual=None,
            next_top=state.top_candidates(nxt),
            tree=_beam_tree(state, context_length, drafted, eta),
            target_calls=lm.calls,
            extra={MjsdStep.KEY: MjsdStep(
                tau=tau, beams=beams, beam_sample=sample, likelihood_sampling=warp.as_dict(),
                prefixes=[MjsdPrefix(j + 1, verdict.log_p[j], verdict.log_q[j], verdict.ratios[j], verdict.passes[j])
                          for j in range(k)],
                eta=eta, kept=draft[:eta], chosen_beam=draft,
            ).to_dict()},
        )


def _draft_tokens(state, draft, p_like, drafted, eta) -> list[DraftToken]:
    """The chosen beam; p and q are the per-token warped likelihoods; no coin (MJSD has none)."""
    out = []
    for i, x in enumerate(draft):
        p_i, q_i = p_like[i], drafted.q_rows[i].to(p_like.dtype)
        out.append(DraftToken(
            position=i, token_id=x, text=state.target.decode_token(x), q=float(q_i[x]), p=float(p_i[x]),
            coin=None, threshold=None, accepted=i < eta,
            overlap=float(torch.minimum(p_i, q_i).sum()), top=state.top_candidates(p_i, q_i),
        ))
    return out


def _beam_tree(state, context_length, drafted, eta) -> list[TreeNode]:
    """Root (the last committed token), then every kept beam at every step, in step order."""
    root_id = state.sequence[context_length - 1]
    nodes = [TreeNode(0, -1, root_id, state.target.decode_token(root_id), 0, "root", True, 0.0)]
    if drafted is None:
        return nodes
    previous = [0]  # node index of each beam of the previous step
    for t, step in enumerate(drafted.steps):
        current = []
        for b, beam in enumerate(step):
            parent = previous[beam.parent] if t else 0
            on_kept = t < eta and b == drafted.path[t]
            nodes.append(TreeNode(len(nodes), parent, beam.token_id, state.target.decode_token(beam.token_id),
                                  t + 1, "beam", on_kept, beam.score))
            current.append(len(nodes) - 1)
        previous = current
    return nodes
