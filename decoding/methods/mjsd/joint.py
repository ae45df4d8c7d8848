"""MJSD's building blocks (Qin et al., docs/papers.md): beam drafting on the draft model and joint-likelihood verification.

Notation: p target, q draft, gamma draft length, B beams, tau the threshold. q(x_1..j) and
p(x_1..j) are JOINT likelihoods: products of the per-token distributions after the run's warping
(temperature, top-k, top-p; the paper uses top-k 20, top-p 0.9), never after argmax. At
temperature 0 the joint likelihoods use temperature 1 with the same top-k/top-p (`likelihood_sampling`):
argmax would make every likelihood 0 or 1. Beam search itself is deterministic; only the one
extra target token per iteration is the argmax there.

Beam search keeps, at each step, the true top-B of the b x |V| expansions of the b live beams by
joint log-likelihood (expansions of probability 0 are never kept, so fewer than B beams can live
when top-k/top-p leave few tokens). Beam sampling (optional) instead draws B distinct expansions
without replacement with probability proportional to their joint likelihood.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ...lm.cached_lm import CachedLM
from ...lm.hf_cache import cache_kwargs, grown_cache
from ...rules.warp import SamplingConfig, warp_logits

MAX_BEAMS = 8


def likelihood_sampling(sampling: SamplingConfig) -> SamplingConfig:
    """The warping used for joint likelihoods: the run's, with temperature 0 read as temperature 1."""
    if sampling.greedy:
        return SamplingConfig(1.0, sampling.top_k, sampling.top_p)
    return sampling


@dataclass
class Beam:
    parent: int  # index into the previous step's beams (-1 at step 1: the context)
    token_id: int
    score: float  # joint log-likelihood log q(x_1..t) of the beam's prefix


@dataclass
class BeamDraft:
    steps: list[list[Beam]]  # steps[t-1]: the beams kept after t tokens, best first
    tokens: list[int]  # the chosen (best) beam's tokens x_1..x_gamma
    log_q: list[float]  # log q(x_1..j) for j = 1..gamma along the chosen beam
    q_rows: torch.Tensor  # (gamma, V): the warped draft distribution at each position of the chosen beam
    path: list[int] = field(default_factory=list)  # index of the chosen beam's node at each step


def select_expansions(scores: torch.Tensor, logq: torch.Tensor, beams: int, generator=None,
                      sample: bool = False) -> tuple[list[int], list[int], list[float]]:
    """Pick the next beams from the b x V expansions: scores (b,) joint log-likelihoods so far,
    logq (b, V) log of the warped next-token distribution. Returns (parents, tokens, joint scores),
    best first; only finite (probability > 0) expansions are kept."""
    joint = (scores[:, None].double() + logq.double()).reshape(-1)
    finite = int(torch.isfinite(joint).sum())
    n = min(beams, finite)
    if sample:
        weights = torch.exp(joint - joint.max())
        picked = torch.multinomial(weights.float(), n, replacement=False, generator=generator)
        picked = picked[torch.argsort(joint[picked], descending=True)]
    else:
        picked = torch.topk(joint, n).indices
    width = logq.shape[-1]
    return (picked // width).tolist(), (picked % width).tolist(), joint[picked].tolist()


@torch.inference_mode()
def beam_draft(lm: CachedLM, sequence: list[int], gamma: int, beams: int, sampling: SamplingConfig,
               generator=None, sample: bool = False) -> BeamDraft:
    """B beams for gamma steps on the draft model. `lm` keeps its single-sequence cache of the
    committed `sequence` (extended here if needed, never beyond it): the beams run in one batched
    forward pass per step on a copy of that cache (a DynamicCache, whatever the backend: `lm.beam_cache()`) (batch_select_indices reorders it per step)."""
    warp = likelihood_sampling(sampling)
    logits = lm.extend(sequence)[-1:]  # (1, V): the distribution of x_1
    cache = lm.beam_cache() if gamma > 1 else None  # the beams' copy; lm's cache stays single-sequence
    position = lm.length
    scores = torch.zeros(1, dtype=torch.float64)
    steps: list[list[Beam]] = []
    logq_rows: list[torch.Tensor] = []
    for t in range(gamma):
        logq = warp_logits(logits, warp).log()  # (b, V), -inf where the warp removed a token
        logq_rows.append(logq)
        parents, tokens, joint = select_expansions(scores, logq, beams, generator, sample)
        steps.append([Beam(pa if t else -1, tok, sc) for pa, tok, sc in zip(parents, tokens, joint)])
        scores = torch.tensor(joint, dtype=torch.float64)
        if t + 1 < gamma:
            cache.batch_select_indices(torch.tensor(parents, device=lm.device))
            ids = torch.tensor(tokens, device=lm.device).unsqueeze(1)
            out = lm.model(input_ids=ids, **cache_kwargs(lm.model, cache), use_cache=True,
                           position_ids=torch.full_like(ids, position + t))
            cache = grown_cache(out)
            lm.calls += 1  # one batched draft pass per step
            logits = out.logits[:, -1, : lm.vocab_width].float()
    # backtrack the best final beam (steps are sorted best first)
    path = [0] * gamma
    node = 0
    for t in range(gamma - 1, -1, -1):
        path[t] = node
        node = steps[t][node].parent
    tokens = [steps[t][path[t]].token_id for t in range(gamma)]
    log_q = [steps[t][path[t]].score for t in range(gamma)]
    # the warped q row of each position: row of the chosen beam's parent at that step
    rows = []
    for t in range(gamma):
        parent_row = 0 if t == 0 else path[t - 1]
        rows.append(logq_rows[t][parent_row].exp())
    q_rows = torch.stack(rows) if rows else torch.empty(0, lm.vocab_width)
    return BeamDraft(steps, tokens, log_q, q_rows, path)


@dataclass
class JointVerdict:
    eta: int  # accepted draft tokens: the largest passing prefix length, 0 if none
    log_p: list[float]  # log p(x_1..j), j = 1..gamma
    log_q: list[float]
    ratios: list[float]  # min(1, p(x_1..j) / q(x_1..j))
    passes: list[bool]  # ratio > tau


def joint_verify(p_token_probs: list[float], log_q: list[float], tau: float) -> JointVerdict:
    """Algorithm 1 of Qin et al. (MJSD), lines 6-13: prefix x_1..j passes iff min(1, p(x_1..j)/q(x_1..j)) > tau.

    Every j is checked, since the joint ratio is not monotone in j, and eta is the LARGEST passing
    j (0 if none). (The pseudo-code starts eta at -1 and assigns it the token id j = x_i; what the
    text means, and what we do, is eta = the length of the longest passing prefix.) Compared in
    log space so tiny joint likelihoods do not underflow: tau = 0 passes every prefix with p > 0,
    tau = 1 passes none.
    """
    log_tau = math.log(tau) if tau > 0 else -math.inf
    log_p, ratios, passes = [], [], []
    running = 0.0
    eta = 0
    for j, (pj, lq) in enumerate(zip(p_token_probs, log_q), start=1):
        running += math.log(pj) if pj > 0 else -math.inf
        log_p.append(running)
        log_ratio = min(0.0, running - lq) if running > -math.inf else -math.inf
        ratios.append(math.exp(log_ratio))
        ok = log_ratio > log_tau
        passes.append(ok)
        if ok:
            eta = j
    return JointVerdict(eta, log_p, list(log_q), ratios, passes)
