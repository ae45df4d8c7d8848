"""Closed forms from Leviathan et al. (section 3; docs/papers.md) and a measured cost model.

Notation (docs/papers.md): p target, q draft, alpha expected acceptance, gamma draft length,
c = time of one draft step / time of one target step, c_hat = the same ratio for arithmetic
operations, l lenience.

Two figures are kept apart everywhere:
- *tokens per target call* (`expected_tokens_per_call`, eq. 1) counts the one correction/bonus
  token that every iteration emits;
- *accepted length* (`expected_accepted_length`) counts accepted draft tokens only.

All results assume the paper's simplification that the per-position acceptances are i.i.d.
(section 3.1) and long generations (remark after Theorem 3.8).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import torch

__all__ = [
    "alpha",
    "lenient_alpha",
    "expected_tokens_per_call",
    "expected_accepted_length",
    "improvement_factor",
    "optimal_gamma",
    "ops_increase",
    "verify_cost_ratio",
    "measured_improvement",
    "improvement_curve",
]

# Within this distance of 1 we return the limit instead of the ratio (Equation 1 is 0/0 at 1).
_ALPHA_ONE_TOL = 1e-12


# --------------------------------------------------------------------------- validation
def _check_alpha(a: float) -> float:
    if type(a) is float and 0.0 <= a <= 1.0:  # the common case, without the slower ABC check below
        return a
    if isinstance(a, bool) or not isinstance(a, numbers.Real):
        raise ValueError(f"alpha must be a real number in [0, 1], got {a!r}")
    a = float(a)
    if not (0.0 <= a <= 1.0):  # also rejects NaN
        raise ValueError(f"alpha must be in [0, 1], got {a}")
    return a


def _check_gamma(g: int) -> int:
    if type(g) is int and g >= 0:  # the common case, without the slower ABC check below
        return g
    if isinstance(g, bool) or not isinstance(g, numbers.Integral):
        raise ValueError(f"gamma must be an integer >= 0 (0 = plain decoding), got {g!r}")
    g = int(g)
    if g < 0:
        raise ValueError(f"gamma must be >= 0 (0 = plain decoding), got {g}")
    return g


def _check_nonneg(x: float, name: str) -> float:
    if type(x) is float and 0.0 <= x < math.inf:  # the common case, without the slower ABC check below
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number >= 0, got {x!r}")
    x = float(x)
    if not (0.0 <= x < math.inf):
        raise ValueError(f"{name} must be finite and >= 0, got {x}")
    return x


def _check_positive(x: float, name: str) -> float:
    x = _check_nonneg(x, name)
    if x == 0.0:
        raise ValueError(f"{name} must be > 0, got {x}")
    return x


def _check_distributions(p, q) -> tuple[torch.Tensor, torch.Tensor]:
    # Non-tensor inputs (lists, numpy) and integer tensors are taken as float64.
    p = p if isinstance(p, torch.Tensor) and p.is_floating_point() else torch.as_tensor(p, dtype=torch.float64)
    q = q if isinstance(q, torch.Tensor) and q.is_floating_point() else torch.as_tensor(q, dtype=torch.float64)
    dtype = torch.promote_types(p.dtype, q.dtype)
    p, q = p.to(dtype), q.to(dtype)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError("p and q must have a non-empty last (vocabulary) dimension")
    for name, t in (("p", p), ("q", q)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} has non-finite entries")
        if bool((t < 0).any()):
            raise ValueError(f"{name} has negative entries")
        tol = 1e-6 if t.dtype == torch.float64 else 1e-3
        sums = t.sum(-1)
        if bool(((sums - 1).abs() > tol).any()):
            raise ValueError(f"{name} does not sum to 1 along the last dim (within {tol}): {sums.tolist()}")
    return p, q


# --------------------------------------------------------------------------- alpha (section 3.2)
def alpha(p, q) -> float:
    """Strict acceptance: sum_x min(p(x), q(x)) over the last dim (section 3.2).

    That sum is beta for one prefix; leading dims are prefixes/positions and their mean is
    returned, alpha = E(beta) (section 3.2, the expectation the paper evaluates in 4.2).
    """
    p, q = _check_distributions(p, q)
    beta = torch.minimum(p, q).sum(-1)
    return float(beta.mean().clamp(0.0, 1.0))


def lenient_alpha(p, q, lenience: float) -> float:
    """Acceptance with lenience l in (0, 1]: sum_x min(p(x)/l, q(x)) (appendix A.5)."""
    if isinstance(lenience, bool) or not isinstance(lenience, numbers.Real) or not (0.0 < float(lenience) <= 1.0):
        raise ValueError(f"lenience must be in (0, 1], got {lenience!r}")
    p, q = _check_distributions(p, q)
    beta = torch.minimum(p / float(lenience), q).sum(-1)
    return float(beta.mean().clamp(0.0, 1.0))


# --------------------------------------------------------------------------- expected tokens
def _geometric_sum(a: float, n: int) -> float:
    """sum_{k=0}^{n-1} a^k = (1 - a^n)/(1 - a), computed without cancellation near a = 1."""
    if n == 0:
        return 0.0
    if a == 0.0:
        return 1.0
    one_minus_a = 1.0 - a  # exact for a in [0.5, 1] (Sterbenz)
    if one_minus_a <= _ALPHA_ONE_TOL:
        return float(n)  # limit at a = 1
    # 1 - a^n = -expm1(n log a), with log a = log1p(-(1 - a)) accurate near 1.
    return -math.expm1(n * math.log1p(-one_minus_a)) / one_minus_a


def expected_tokens_per_call(alpha: float, gamma: int) -> float:
    """E[tokens per target call] = (1 - a^(g+1)) / (1 - a); g + 1 at a = 1 (Leviathan eq. 1).

    Includes the correction/bonus token. gamma = 0 is plain decoding: 1.
    """
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    return _geometric_sum(a, g + 1)


def expected_accepted_length(alpha: float, gamma: int) -> float:
    """E[accepted draft tokens per iteration] = a (1 - a^g) / (1 - a) = eq. 1 minus 1; g at a = 1."""
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    return a * _geometric_sum(a, g)


def expected_tokens_two_rates(alpha_first: float, alpha_next: float, gamma: int) -> float:
    """E[tokens per target call] when the first draft token is accepted with probability
    alpha_first and each later one, given its predecessor was, with alpha_next:
    1 + a1 (1 - a2^g) / (1 - a2). Copied spans need it: once a copy starts to match it tends to go
    on matching. Equals eq. 1 when a1 = a2."""
    a1, a2, g = _check_alpha(alpha_first), _check_alpha(alpha_next), _check_gamma(gamma)
    return 1.0 + (a1 * _geometric_sum(a2, g) if g else 0.0)


def improvement_factor(alpha: float, gamma: int, c: float) -> float:
    """Expected walltime improvement (1 - a^(g+1)) / ((1 - a)(g c + 1)) (Theorem 3.8)."""
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    c = _check_nonneg(c, "c")
    return _geometric_sum(a, g + 1) / (g * c + 1.0)


def optimal_gamma(alpha: float, c: float, max_gamma: int = 64) -> int:
    """Integer gamma in 1..max_gamma maximizing Theorem 3.8 (section 3.5); ties -> smallest."""
    a = _check_alpha(alpha)
    c = _check_nonneg(c, "c")
    max_gamma = _check_gamma(max_gamma)
    if max_gamma < 1:
        raise ValueError(f"max_gamma must be >= 1, got {max_gamma}")
    best_g, best = 1, improvement_factor(a, 1, c)
    for g in range(2, max_gamma + 1):
        value = improvement_factor(a, g, c)
        if value > best * (1.0 + 1e-12):  # strict: round-off never moves a tie to a larger gamma
            best_g, best = g, value
    return best_g


def ops_increase(alpha: float, gamma: int, c_hat: float) -> float:
    """Expected factor of increase in arithmetic operations (Theorem 3.11).

    (1 - a)(g c_hat + g + 1) / (1 - a^(g+1)); c_hat is the ratio of arithmetic operations per
    token of draft to target (section 3.4), not the time ratio c. Limit (g c_hat + g + 1)/(g + 1)
    at a = 1. Neglects the cost of the rejection sampling itself, as the paper does.
    """
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    c_hat = _check_nonneg(c_hat, "c_hat")
    return (g * c_hat + g + 1.0) / _geometric_sum(a, g + 1)


# --------------------------------------------------------------------------- measured cost model
def verify_cost_ratio(t_verify: float, t_target_step: float) -> float:
    """Time of one target pass over gamma + 1 tokens / time of one single-token target step.

    Theorem 3.8 assumes 1 (enough parallel compute, section 3.4); on a CPU it is larger.
    """
    return _check_positive(t_verify, "t_verify") / _check_positive(t_target_step, "t_target_step")


def measured_improvement(
    alpha: float, gamma: int, t_draft_step: float, t_target_step: float, t_verify: float,
    alpha_next: float | None = None,
) -> float:
    """Improvement over plain decoding when the verify pass costs its measured time.

    Per iteration: gamma draft steps + one verify pass of gamma + 1 tokens, producing eq. 1 tokens
    on average; plain decoding costs t_target_step per token (proof of Theorem 3.8 with the
    target's cost replaced by t_verify). Equals `improvement_factor(alpha, gamma, t_draft /
    t_target)` when t_verify == t_target_step. With `alpha_next`, alpha is the first position's
    acceptance and the tokens are `expected_tokens_two_rates(alpha, alpha_next, gamma)`.
    """
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    t_d = _check_nonneg(t_draft_step, "t_draft_step")
    t_t = _check_positive(t_target_step, "t_target_step")
    t_v = _check_positive(t_verify, "t_verify")
    tokens = _geometric_sum(a, g + 1) if alpha_next is None else expected_tokens_two_rates(a, alpha_next, g)
    tokens_per_second = tokens / (g * t_d + t_v)
    return tokens_per_second * t_t


def improvement_curve(
    alpha: float, c: float, gammas: Iterable[int] = range(0, 17), c_hat: float | None = None
) -> list[dict]:
    """Rows for the theory panel: per gamma, expected tokens per call, expected accepted length,
    improvement factor (Theorem 3.8) and, when c_hat is given, ops increase (Theorem 3.11)."""
    a = _check_alpha(alpha)
    c = _check_nonneg(c, "c")
    rows = []
    for g in gammas:
        g = _check_gamma(g)
        row = {
            "gamma": g,
            "expected_tokens": expected_tokens_per_call(a, g),
            "expected_accepted": expected_accepted_length(a, g),
            "improvement": improvement_factor(a, g, c),
        }
        if c_hat is not None:
            row["ops_increase"] = ops_increase(a, g, c_hat)
        rows.append(row)
    return rows
