"""Acceptance rules of speculative sampling as small pure functions over probability tensors.

Notation (Leviathan et al. and the worked example; docs/papers.md): p is the target distribution,
q the draft distribution, x a draft token drawn from q, u ~ U(0, 1) the coin, l the lenience.

Strict rule (Algorithm 1): accept x iff u <= min(1, p(x) / q(x)); on the first rejection draw the
correction token from the residual norm(max(0, p - q)); when all gamma drafts pass, draw a bonus
token from p at the next position. (The worked example writes the comparison the wrong way round.)

Lenient rule (appendix A.5): accept x iff u <= min(1, p(x) / (l q(x))) with l in (0, 1], keeping
the same residual, so one step outputs  min(q, p/l) + (1 - sum min(q, p/l)) * residual  and no
token gets more than p/l. With l = 1 that is exactly p.  At temperature 0 (p, q one-hot) lenience
is applied before the argmax: accept x iff p_raw(x) >= l * max p_raw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import keyed

RESIDUAL_FLOOR = 1e-12  # below this residual mass p == q up to round-off: sample from p


def validate_lenience(lenience: float) -> None:
    if not (0 < lenience <= 1):
        raise keyed(f"lenience must be in (0, 1] (got {lenience})", "settings.lenience", value=lenience)


def acceptance_threshold(p_x: torch.Tensor, q_x: torch.Tensor, lenience: float = 1.0) -> torch.Tensor:
    """min(1, p(x) / (l q(x))): the probability of accepting draft token x (x was drawn from q, so q(x) > 0)."""
    return torch.clamp(p_x / (lenience * q_x), max=1.0)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, float]:
    """norm(max(0, p - q)) over the last dim, and its mass before normalisation (= 1 - alpha).

    Where the mass is below RESIDUAL_FLOOR (p == q up to round-off) the residual is p itself.
    """
    diff = torch.clamp(p - q, min=0.0)
    mass = float(diff.sum())
    if mass < RESIDUAL_FLOOR:
        return p / p.sum(), mass
    return diff / mass, mass


def lenient_output_distribution(p: torch.Tensor, q: torch.Tensor, lenience: float = 1.0) -> torch.Tensor:
    """The exact distribution of one speculative step: min(q, p/l) + (1 - sum min(q, p/l)) * residual."""
    accepted_mass = torch.minimum(q, p / lenience)
    residual, _ = residual_distribution(p, q)
    return accepted_mass + (1.0 - accepted_mass.sum()) * residual


def greedy_lenient_rule(p_x: float, p_max: float, lenience: float = 1.0) -> tuple[bool, float]:
    """Temperature 0 with lenience (A.5) on values read already: accept x iff p_raw(x) >= l * max p_raw, from
    p_x = p_raw(x) and p_max = max p_raw. Returns (accepted, threshold)."""
    threshold = lenience * p_max
    return bool(p_x >= threshold), threshold


def greedy_lenient_accept(p_raw: torch.Tensor, x: int, lenience: float = 1.0) -> tuple[bool, float]:
    """`greedy_lenient_rule` on one unwarped target row p_raw (V,) and the draft token x."""
    return greedy_lenient_rule(float(p_raw[x]), float(p_raw.max()), lenience)


@dataclass
class ChainVerdict:
    """Outcome of verifying one chain of draft tokens against the target."""

    n_accepted: int
    thresholds: list[float]
    coins: list[float | None]
    accepted: list[bool | None]  # None: never examined (after the first rejection)
    next_distribution: torch.Tensor  # residual (after a rejection) or p at the bonus position
    next_is_bonus: bool
    residual_mass: float | None = None  # sum max(0, p - q) at the rejected position
    residual_fell_back_to_p: bool = False
    p_raw_rows: torch.Tensor | None = None  # the unwarped target rows the greedy rule read, if any
    extra: dict = field(default_factory=dict)


def verify_chain(
    p_rows: torch.Tensor,
    q_rows: torch.Tensor,
    draft: list[int],
    coins: torch.Tensor | None,
    lenience: float = 1.0,
    p_raw_rows: torch.Tensor | None = None,
) -> ChainVerdict:
    """Steps 4-6 of Algorithm 1 for one chain: p_rows is (k+1, V), q_rows (k, V), draft k ids.

    With `coins` (k uniforms) the sampled rule is used; with coins=None the greedy rule on
    `p_raw_rows` (unwarped target probabilities) is used instead.
    """
    k = len(draft)
    thresholds: list[float] = []
    accepted: list[bool | None] = [None] * k
    coin_list: list[float | None] = [None] * k
    if coins is not None and k:
        xs = torch.tensor(draft, device=p_rows.device)
        rows = torch.arange(k, device=p_rows.device)
        all_thresholds = acceptance_threshold(p_rows[rows, xs], q_rows[rows, xs], lenience).tolist()
        coin_values = coins.tolist()
    elif k:
        # greedy: p_raw(x_i) and max p_raw of every draft row in one host read (a GPU sync), not two per row;
        # the values, and so greedy_lenient_rule's comparison, are those a row at a time would give
        xs = torch.tensor(draft, device=p_raw_rows.device)
        rows = torch.arange(k, device=p_raw_rows.device)
        p_x, p_max = torch.stack([p_raw_rows[rows, xs], p_raw_rows[:k].amax(dim=-1)]).tolist()
    for i, x in enumerate(draft):
        if coins is not None:
            threshold, u = all_thresholds[i], coin_values[i]
            ok = u <= threshold
            coin_list[i] = u
        else:
            ok, threshold = greedy_lenient_rule(p_x[i], p_max[i], lenience)
        thresholds.append(threshold)
        accepted[i] = ok
        if not ok:
            residual, mass = residual_distribution(p_rows[i], q_rows[i])
            return ChainVerdict(
                n_accepted=i,
                thresholds=thresholds,
                coins=coin_list,
                accepted=accepted,
                next_distribution=residual,
                next_is_bonus=False,
                residual_mass=mass,
                residual_fell_back_to_p=mass < RESIDUAL_FLOOR,
                p_raw_rows=p_raw_rows,
            )
    return ChainVerdict(
        n_accepted=k,
        thresholds=thresholds,
        coins=coin_list,
        accepted=accepted,
        next_distribution=p_rows[k],
        next_is_bonus=True,
        p_raw_rows=p_raw_rows,
    )
