"""The lesson's worked draft tree: two guesses under one token, on the worked example's p and q.

Under one token the draft proposes siblings drawn from q without replacement, "is" then "stock"
(the lesson's hand-made choice), and the target tries them in order with recursive rejection
(Jeon et al., "Recursive Speculative Decoding", arXiv:2402.14160; SpecInfer, Miao et al.,
arXiv:2305.09781):

    p_0 = p, q_0 = q
    sibling i (x_i ~ q_i) is kept iff u_i <= min(1, p_i(x_i) / q_i(x_i))
    on its rejection  p_{i+1} = norm(max(0, p_i - q_i))   (the residual; it does not depend on x_i)
                      q_{i+1} = q_i without x_i, renormalised
    every sibling rejected: the correction token is drawn from the last residual.

The check is the engine's own (`decoding.rules.tree_acceptance.verify_tree` on a one-level tree), and the
closed-form figures use its sibling step (`recursive_rejection_step`). No Gradio here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB
from decoding.rules.tree_acceptance import recursive_rejection_step, verify_tree

SIBLINGS = ("is", "stock")  # the worked tree's guesses under one token, in the order they are tried
ABOVE_EVERY_THRESHOLD = 2.0  # a coin that rejects any guess: the sibling step's rejection branch (p_{i+1}, q_{i+1})


@dataclass
class Sibling:
    """One guess of the worked tree and how the target judged it."""

    token: str
    q: float | None  # q_i(x): the probability it was drawn with (earlier siblings removed; None: untried)
    p: float | None  # p_i(x): what the target's distribution, after earlier rejections, gives it (None: untried)
    threshold: float | None  # min(1, p_i/q_i)
    coin: float | None
    verdict: str  # "accepted" | "rejected" | "untried"
    residual: list[float] | None = None  # p_{i+1} over the vocabulary, after its rejection
    residual_mass: float | None = None  # sum max(0, p_i - q_i)


def pq() -> tuple[torch.Tensor, torch.Tensor]:
    """The worked example's p and q, (V,) float64."""
    return torch.tensor(EXAMPLE_P, dtype=torch.float64), torch.tensor(EXAMPLE_Q, dtype=torch.float64)


def index(token: str) -> int:
    if token not in EXAMPLE_VOCAB:
        raise ValueError(f"{token!r} is not in the worked example's vocabulary {EXAMPLE_VOCAB}")
    return EXAMPLE_VOCAB.index(token)


def rejected(p: torch.Tensor, q: torch.Tensor, x: int):
    """The sibling step after x's rejection: (p_{i+1}, q_{i+1}, threshold min(1, p_i(x)/q_i(x)), mass)."""
    step = recursive_rejection_step(p, q, x, ABOVE_EVERY_THRESHOLD)
    return step.p_next, step.q_next, step.threshold, step.mass


def distributions(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_rank, q_rank): what the sibling of that rank is tested against and drawn from, given that every
    earlier sibling was rejected."""
    p, q = pq()
    for token in SIBLINGS[:rank]:
        p, q, _, _ = rejected(p, q, index(token))
    return p, q


def check(siblings: int = 2, seed: int = 0) -> tuple[list[Sibling], str | None]:
    """The worked tree's first `siblings` guesses checked by the engine's tree rule with the coins of `seed`
    (torch.rand, seeded, as the engine draws them): each guess's verdict, and the correction token (drawn
    from the last residual with the same generator) when every guess was rejected, else None."""
    if siblings not in (1, 2):
        raise ValueError(f"the worked tree has 1 or 2 guesses under its token (got {siblings})")
    generator = torch.Generator().manual_seed(int(seed))
    u = torch.rand(siblings, generator=generator, dtype=torch.float64)
    p, q = pq()
    n = siblings + 1
    tokens = [-1] + [index(t) for t in SIBLINGS[:siblings]]
    verdict = verify_tree([-1] + [0] * siblings, tokens, p.expand(n, -1), q.expand(n, -1),
                          torch.cat([u.new_zeros(1), u]))
    out = []
    for c in range(1, n):
        v, token = verdict.nodes[c], SIBLINGS[c - 1]
        residual = v.residual.tolist() if v.residual is not None else None
        out.append(Sibling(token, v.q, v.p,
                           v.threshold, v.coin, v.verdict, residual, v.residual_mass))
    correction = None
    if not verdict.path:
        correction = EXAMPLE_VOCAB[int(torch.multinomial(verdict.next_distribution, 1, generator=generator))]
    return out, correction


def keep_chance(siblings: int, p: torch.Tensor | None = None, q: torch.Tensor | None = None) -> float:
    """The chance that one of `siblings` guesses drawn from q without replacement is kept, in closed form:
    sum over the first guess x of q(x) [t(x) + (1 - t(x)) * (the same for the rest, against p_1 and q
    without x)], t = min(1, p/q). One guess: sum min(p, q), a chain's alpha."""
    if p is None or q is None:
        p, q = pq()
    if siblings <= 0 or float(q.sum()) <= 0:
        return 0.0
    total = 0.0
    for x in range(len(q)):
        if float(q[x]) <= 0:
            continue
        p_next, q_next, t, _ = rejected(p, q, x)  # p_next does not depend on which guess was rejected
        rest = keep_chance(siblings - 1, p_next, q_next) if t < 1 else 0.0
        total += float(q[x]) * (t + (1 - t) * rest)
    return total
