"""The lab's implementation switch: the correct speculative-sampling step and real-world mistakes.

Each implementation is one step on hand-written distributions p (target) and q (draft), both (V,)
float64 tensors summing to 1 (docs/papers.md's notation). It is described by two pure functions:

- `parts(p, q) -> (accepted, after)`: accepted (V,) is the probability that the step keeps the draft
  and outputs token x; after (V,) is the distribution drawn from after a rejection. The step's output
  distribution is then, in closed form,  accepted + (1 - sum accepted) * after,  and its acceptance
  rate is sum accepted (`output_distribution`, `acceptance_probability`).
- `sample(p, q, n, generator) -> (tokens, accepted)`: n independent steps drawn in one vectorised
  batch, (n,) int64 tokens and (n,) bool accepted; their histogram converges to the closed form.

The correct rule (Leviathan et al., "Fast Inference from Transformers via Speculative Decoding",
arXiv:2211.17192, Algorithm 1) gives accepted = min(p, q), after = norm(max(0, p - q)), output p.
The mistakes are ones that shipped or were proposed in public; `IMPLEMENTATIONS` holds them in
menu order with a plain sentence on what each does wrong and where it happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .acceptance import acceptance_threshold, residual_distribution

WRONG_Q_TEMPERATURE = 0.5  # (b): the temperature the draft samples at while the rule divides by raw q
TOP_K_TARGET = 20  # (e): the target's log-probabilities kept by the truncating visualizer


def _draw(dist: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """n tokens from dist (V,) -> (n,) int64."""
    return torch.multinomial(dist, n, replacement=True, generator=generator)


def _one_hot(index: int, like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like)
    out[index] = 1.0
    return out


def _ratio_capped(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """min(1, p/q) per token (V,), 0 where q = 0 (no draft token can be there)."""
    return torch.where(q > 0, torch.clamp(p / torch.where(q > 0, q, 1.0), max=1.0), torch.zeros_like(p))


def warp_temperature(q: torch.Tensor, temperature: float) -> torch.Tensor:
    """q (V,) at a temperature: q^(1/T) renormalised, i.e. softmax(log q / T); zeros stay zero."""
    w = torch.where(q > 0, q.clamp(min=1e-300) ** (1.0 / temperature), torch.zeros_like(q))
    return w / w.sum()


def truncate_top_k(p: torch.Tensor, k: int) -> torch.Tensor:
    """p (V,) cut to its k most likely tokens and renormalised (all of p when V <= k)."""
    if p.numel() <= k:
        return p.clone()
    keep = torch.zeros_like(p, dtype=torch.bool)
    keep[torch.topk(p, k).indices] = True
    cut = torch.where(keep, p, torch.zeros_like(p))
    return cut / cut.sum()


def _rule_samples(p: torch.Tensor, q_drawn: torch.Tensor, q_divided: torch.Tensor, after: torch.Tensor, n: int,
                  generator: torch.Generator, greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The shared skeleton: draft x ~ q_drawn (or its argmax when greedy), keep x iff u <= min(1, p(x)/q_divided(x)),
    otherwise output a token drawn from `after`. Returns (n,) tokens and (n,) accepted."""
    if greedy:
        x = torch.full((n,), int(torch.argmax(q_drawn)), dtype=torch.int64)
    else:
        x = _draw(q_drawn, n, generator)
    u = torch.rand(n, generator=generator, dtype=p.dtype)
    accepted = u <= acceptance_threshold(p[x], q_divided[x])
    out = x.clone()
    n_rejected = int((~accepted).sum())
    if n_rejected:
        out[~accepted] = _draw(after, n_rejected, generator)
    return out, accepted


# --- the correct rule -------------------------------------------------------------------------------------------

def correct_parts(p, q):
    """Algorithm 1: accepted min(p, q) (V,), after a rejection the residual norm(max(0, p - q)) (V,)."""
    return torch.minimum(p, q), residual_distribution(p, q)[0]


def correct_sample(p, q, n, generator):
    """n steps of Algorithm 1: (n,) tokens, (n,) accepted."""
    return _rule_samples(p, q, q, residual_distribution(p, q)[0], n, generator)


# --- (a) greedy draft, divided by its softmax q -----------------------------------------------------------------

def greedy_softmax_parts(p, q):
    """The draft always proposes x* = argmax q (probability 1), kept with probability min(1, p(x*)/q(x*))."""
    star = int(torch.argmax(q))
    accepted = _one_hot(star, p) * min(1.0, float(p[star] / q[star]))
    return accepted, residual_distribution(p, q)[0]


def greedy_softmax_sample(p, q, n, generator):
    return _rule_samples(p, q, q, residual_distribution(p, q)[0], n, generator, greedy=True)


# --- (b) dividing by a q other than the one sampled from ---------------------------------------------------------

def wrong_q_parts(p, q):
    """The draft samples from q at temperature WRONG_Q_TEMPERATURE but the rule divides by the raw q."""
    q_drawn = warp_temperature(q, WRONG_Q_TEMPERATURE)
    return q_drawn * _ratio_capped(p, q), residual_distribution(p, q)[0]


def wrong_q_sample(p, q, n, generator):
    return _rule_samples(p, warp_temperature(q, WRONG_Q_TEMPERATURE), q, residual_distribution(p, q)[0], n, generator)


# --- (c) resampling from p after a rejection ---------------------------------------------------------------------

def resample_p_parts(p, q):
    """Accepted min(p, q) (V,) as in the correct rule, but a rejection draws from p itself (V,)."""
    return torch.minimum(p, q), p.clone()


def resample_p_sample(p, q, n, generator):
    return _rule_samples(p, q, q, p, n, generator)


# --- (d) exact match only ------------------------------------------------------------------------------------------

def exact_match_parts(p, q):
    """Draft x ~ q and the target's own y ~ p, independent; keep x iff x == y, else output y. Output: p."""
    accepted = p * q
    rest = p - accepted  # y with y != x: p(y) (1 - q(y))
    mass = float(rest.sum())
    return accepted, (rest / mass if mass > 1e-12 else p.clone())


def exact_match_sample(p, q, n, generator):
    x = _draw(q, n, generator)
    y = _draw(p, n, generator)
    return y, x == y  # the output is always the target's own sample


# --- (e) a target truncated to its top 20 log-probabilities ---------------------------------------------------------

def top20_parts(p, q):
    """The correct rule's parts with p replaced by its top-20 cut (both (V,))."""
    return correct_parts(truncate_top_k(p, TOP_K_TARGET), q)


def top20_sample(p, q, n, generator):
    return correct_sample(truncate_top_k(p, TOP_K_TARGET), q, n, generator)


@dataclass(frozen=True)
class Implementation:
    """One way to implement the step: a key (CLI name), a label and sentences students read, the maths."""

    name: str
    label: str
    what: str  # what it does, and what it does wrong
    where: str  # where it happened
    exact: bool  # its output distribution is p for every p and q
    parts: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    sample: Callable[..., tuple[torch.Tensor, torch.Tensor]]

    def output_distribution(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The closed form (V,): accepted + (1 - sum accepted) * after."""
        accepted, after = self.parts(p, q)
        return accepted + (1.0 - accepted.sum()) * after

    def acceptance_probability(self, p: torch.Tensor, q: torch.Tensor) -> float:
        """The chance one step keeps the draft token: sum of `accepted`."""
        return float(self.parts(p, q)[0].sum())


IMPLEMENTATIONS: dict[str, Implementation] = {i.name: i for i in (
    Implementation(
        "correct", "Correct rule",
        "Draws the draft from q, keeps it with probability min(1, p/q) and after a rejection draws from the "
        "leftover norm(max(0, p − q)): the output is exactly p.",
        "Leviathan et al. and Chen et al., 2023.", True, correct_parts, correct_sample),
    Implementation(
        "greedy-draft-softmax-q", "Greedy draft treated as if sampled from q",
        "The draft always proposes its most likely token even at temperature above 0, yet the rule divides by q "
        "as if that token had been drawn from q, so the draft's favourite comes out too often and the rest "
        "too rarely.",
        "The transformers library, GitHub issue #32867, fixed by pull request #33534.", False,
        greedy_softmax_parts, greedy_softmax_sample),
    Implementation(
        "wrong-q", "Divides by a different q than the one drawn from",
        f"The draft samples at temperature {WRONG_Q_TEMPERATURE:g} but the rule divides by, and takes the leftover "
        "from, the draft's q before that warping, so the coin no longer undoes the draft's bias.",
        "The transformers library, GitHub issue #47932.", False, wrong_q_parts, wrong_q_sample),
    Implementation(
        "resample-from-p", "After a rejection, draws from p",
        "After a rejection it draws the replacement from p instead of the leftover norm(max(0, p − q)), so "
        "tokens the draft already proposes often are produced twice over.",
        "A common slip in first implementations of speculative sampling.", False,
        resample_p_parts, resample_p_sample),
    Implementation(
        "exact-match", "Keeps only exact matches",
        "The target draws its own token and the draft token is kept only when both are the same: the output "
        "is still exactly p, but drafts are kept Σ p·q of the time instead of Σ min(p, q), so most of the "
        "speed-up is lost once sampling is on.",
        "Proposed for the mlx-lm library in GitHub pull request #1709.", True, exact_match_parts, exact_match_sample),
    Implementation(
        "top20-target", "Target cut to its top 20 tokens",
        f"Verifies against the target's {TOP_K_TARGET} most likely tokens, renormalised, so no other token can "
        f"ever appear and the top {TOP_K_TARGET} come out too often (with {TOP_K_TARGET} tokens or fewer it is "
        "the correct rule).",
        "A public speculative-decoding visualizer that reads only the top 20 log-probabilities.", False,
        top20_parts, top20_sample),
)}
DEFAULT_IMPLEMENTATION = "correct"


def get_implementation(name: str) -> Implementation:
    """The implementation called `name`, or a ValueError that lists the names."""
    try:
        return IMPLEMENTATIONS[name]
    except KeyError:
        raise ValueError(f"unknown implementation {name!r}; choose one of: {', '.join(IMPLEMENTATIONS)}") from None
