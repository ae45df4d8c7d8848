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

Each step uses the engine's pure rule functions (`acceptance_threshold`, `residual_distribution`);
`remove_token` is the one line the tree rule adds (work-42a's `decoding.rules.tree_acceptance` has the
same step as `recursive_rejection_step`; once it is merged these steps can call it). No Gradio here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoding.rules.acceptance import acceptance_threshold, residual_distribution
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB

SIBLINGS = ("is", "stock")  # the worked tree's guesses under one token, in the order they are tried


@dataclass
class Sibling:
    """One guess of the worked tree and how the target judged it."""

    token: str
    q: float  # q_i(x): the probability it was drawn with (earlier siblings removed)
    p: float | None  # p_i(x): what the target's distribution, after earlier rejections, gives it (None: untried)
    threshold: float | None  # min(1, p_i/q_i)
    coin: float | None
    verdict: str  # "accepted" | "rejected" | "untried"
    residual: list[float] | None = None  # p_{i+1} over the vocabulary, after its rejection
    residual_mass: float | None = None  # sum max(0, p_i - q_i)


def pq() -> tuple[torch.Tensor, torch.Tensor]:
    """The worked example's p and q, (V,) float64."""
    return torch.tensor(EXAMPLE_P, dtype=torch.float64), torch.tensor(EXAMPLE_Q, dtype=torch.float64)


def remove_token(q: torch.Tensor, x: int) -> torch.Tensor:
    """q (V,) without token x, renormalised: the distribution the next sibling is drawn from."""
    out = q.clone()
    out[x] = 0.0
    total = float(out.sum())
    return out / total if total > 0 else out


def index(token: str) -> int:
    if token not in EXAMPLE_VOCAB:
        raise ValueError(f"{token!r} is not in the worked example's vocabulary {EXAMPLE_VOCAB}")
    return EXAMPLE_VOCAB.index(token)


def coins(seed: int, n: int) -> list[float]:
    """The coins u_1..u_n of one check, drawn as the engine draws them (torch.rand, seeded generator)."""
    return torch.rand(n, generator=torch.Generator().manual_seed(int(seed)), dtype=torch.float64).tolist()


def distributions(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_rank, q_rank): what the sibling of that rank is tested against and drawn from, given that every
    earlier sibling was rejected."""
    p, q = pq()
    for token in SIBLINGS[:rank]:
        p, q = residual_distribution(p, q)[0], remove_token(q, index(token))
    return p, q


def check(siblings: int = 2, seed: int = 0) -> tuple[list[Sibling], str | None]:
    """The worked tree's first `siblings` guesses tried in order with the coins of `seed`: each guess's
    verdict, and the correction token (drawn from the last residual, with the same generator) when
    every guess was rejected, else None."""
    if siblings not in (1, 2):
        raise ValueError(f"the worked tree has 1 or 2 guesses under its token (got {siblings})")
    generator = torch.Generator().manual_seed(int(seed))
    u = torch.rand(siblings, generator=generator, dtype=torch.float64).tolist()
    p, q = pq()
    out, kept = [], False
    for rank, token in enumerate(SIBLINGS[:siblings]):
        x = index(token)
        if kept:
            out.append(Sibling(token, float(q[x]), None, None, None, "untried"))
            continue
        threshold = float(acceptance_threshold(p[x], q[x]))
        if u[rank] <= threshold:
            out.append(Sibling(token, float(q[x]), float(p[x]), threshold, u[rank], "accepted"))
            kept = True
            continue
        residual, mass = residual_distribution(p, q)
        out.append(Sibling(token, float(q[x]), float(p[x]), threshold, u[rank], "rejected", residual.tolist(), mass))
        p, q = residual, remove_token(q, x)
    correction = None if kept else EXAMPLE_VOCAB[int(torch.multinomial(p, 1, generator=generator))]
    return out, correction


def keep_chance(siblings: int, p: torch.Tensor | None = None, q: torch.Tensor | None = None) -> float:
    """The chance that one of `siblings` guesses drawn from q without replacement is kept, in closed form:
    sum over the first guess x of q(x) [t(x) + (1 - t(x)) * (the same for the rest, against p_1 and q
    without x)], t = min(1, p/q). One guess: sum min(p, q), a chain's alpha."""
    if p is None or q is None:
        p, q = pq()
    if siblings <= 0 or float(q.sum()) <= 0:
        return 0.0
    residual = residual_distribution(p, q)[0]  # p_1 does not depend on which guess was rejected
    total = 0.0
    for x in range(len(q)):
        if float(q[x]) <= 0:
            continue
        t = float(acceptance_threshold(p[x], q[x]))
        rest = keep_chance(siblings - 1, residual, remove_token(q, x)) if t < 1 else 0.0
        total += float(q[x]) * (t + (1 - t) * rest)
    return total
