"""Mentored decoding (Tran-Thien, docs/papers.md): the lossy acceptance rule that maximizes acceptance under a KL bound.

NOTATION. The post names the draft p and the target q. Here, as everywhere in this project,
p is the TARGET, q the DRAFT, x ~ q the draft token, u ~ U(0, 1) the coin, alpha the acceptance
probability, D the bound. The post's search variables are renamed lambda (its alpha, in the
acceptance ratio) and mu (its beta, in the residual); we also use t = 1 / mu.

THE PROBLEM (the post's, rewritten in our notation). One speculative step with acceptance
probabilities r(x) and residual s outputs

    pi(x) = q(x) r(x) + (1 - alpha) s(x),        alpha = sum_x q(x) r(x),

and mentored decoding chooses r in [0, 1]^V and s in the simplex to

    maximize alpha   subject to   KL(p || pi) = sum_x p(x) log(p(x) / pi(x)) <= D.

The bounded direction is KL(TARGET || OUTPUT): the post bounds the divergence "between the target
distribution and the resulting distribution", and its shortcut "accept directly when the KL
between the target and the draft is below D" only makes sense for that direction (accepting
everything outputs pi = q, so it is feasible iff KL(p || q) <= D). Only tokens with p > 0 enter
the divergence, so the output may put mass where the target has none (it is mode-covering for p,
not a guarantee of support).

DERIVATION. For a given output pi the largest acceptance that realizes it is
alpha = sum_x min(q(x), pi(x)) (accept mass a(x) <= min(q, pi), the residual supplies pi - a >= 0),
so the problem is   max_pi sum_x min(q(x), pi(x))   s.t. KL(p || pi) <= D, pi in the simplex:
a concave objective over a convex set. Its KKT conditions (multiplier nu for the KL, kappa for
sum pi = 1) give, token by token: 1 + nu p/pi = kappa where pi < q, nu p/pi = kappa where pi > q,
and pi = q in between. With lambda = (kappa - 1)/nu and mu = kappa/nu (so lambda <= 1 <= mu):

    pi(x) = clip(q(x), p(x) / mu, p(x) / lambda)          (p(x) > 0)
    r(x)  = min(1, p(x) / (lambda q(x)))                    the post's  min(1, q_i/(alpha p_i))
    s(x)  = max(0, p(x) / mu - q(x)) / (1 - alpha)          the post's  max(0, q_i/beta - p_i)/(...)

mu is tied to lambda by sum pi = 1, i.e.  sum_x max(0, t p(x) - q(x)) = 1 - alpha(lambda)  with
t = 1/mu, a piecewise-linear equation solved exactly from sorted ratios q/p and cumulative sums
(the post's vectorized prefix sums). lambda = 1 gives t = 1: r = min(1, p/q), s = norm(max(0, p - q)),
the strict rule (KL = 0). KL(p || pi) and alpha both decrease in lambda, so the optimum is the
smallest lambda in (0, 1] with KL <= D: a binary search on lambda, as in the post.

A CASE THE POST'S FORMULA MISSES. Where p(x) = 0 (always the case after top-k/top-p warping) the
formula forces pi(x) = 0. When D exceeds the divergence reached at lambda -> 0, the KKT point has
kappa = 1 (lambda = 0): pi(x) = max(q(x), t p(x)) where p > 0, and the mass left over,
1 - sum_{p>0} max(q, t p), is put on the p = 0 tokens in proportion to q, i.e. those drafts are
accepted with probability c = leftover / sum_{p=0} q (any split gives the same alpha and KL).
A second binary search, on t, finds the smallest t with KL <= D. In both regimes alpha = 1 - g(t),
g(t) = sum_{p>0} max(0, t p - q), and the residual is norm(max(0, t p - q)).

SHORTCUTS (the post's): r(x) >= min(1, p(x)/q(x)) always, so a coin that passes the strict
threshold accepts without any search; and when KL(p || q) <= D everything is accepted.
At D = 0 the strict rule is returned verbatim (same residual function as the strict engine), so a
run with D = 0 reproduces strict speculative sampling token for token.

TEMPERATURE 0. p and q are then one-hot (target argmax a, draft token x). If x = a it is accepted;
otherwise the same optimization gives KL(p || pi) = -log pi(a) <= D, so the rule accepts the
wrong draft with probability 1 - exp(-D) (drawn with the run's seeded coin) and otherwise emits a.
Greedy mentored decoding is therefore reproducible but not deterministic in D > 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .acceptance import acceptance_threshold, residual_distribution

SEARCH_STEPS = 60  # bisection steps: the bracket shrinks to 2^-60 of its width


def validate_kl_bound(kl_bound: float) -> None:
    if not (isinstance(kl_bound, (int, float)) and math.isfinite(kl_bound) and kl_bound >= 0):
        raise ValueError(f"the KL bound D must be a finite number >= 0 (got {kl_bound})")


class MentoredSolution(NamedTuple):
    r: torch.Tensor  # acceptance probability of each draft token
    s: torch.Tensor  # residual distribution (drawn from after a rejection)
    acceptance: float  # alpha = sum_x q(x) r(x)
    kl: float  # KL(p || pi) of the output distribution pi


def kl_divergence(p: torch.Tensor, pi: torch.Tensor) -> float:
    """KL(p || pi) = sum_{p > 0} p log(p / pi); inf when pi = 0 somewhere p > 0."""
    p, pi = p.double(), pi.double()
    support = p > 0
    if bool((pi[support] <= 0).any()):
        return math.inf
    return float((p[support] * (p[support].log() - pi[support].log())).sum())


class _Sorted:
    """q/p ratios over the target's support, sorted, with prefix sums: g(t) and its inverse in O(log V)."""

    def __init__(self, p_s: torch.Tensor, q_s: torch.Tensor):
        ratio = q_s / p_s
        self.ratio, order = torch.sort(ratio)
        ps, qs = p_s[order], q_s[order]
        self.P, self.Q = ps.cumsum(0), qs.cumsum(0)
        # g at each breakpoint t = ratio_k: only strictly smaller ratios contribute
        self.G = self.ratio * (self.P - ps) - (self.Q - qs)

    def t_for(self, residual_mass: float) -> float:
        """The t with sum max(0, t p - q) = residual_mass (the smallest one, t >= 0)."""
        if residual_mass <= 0:
            return 0.0
        k = int(torch.searchsorted(self.G, torch.tensor([residual_mass], dtype=self.G.dtype), right=True)) - 1
        k = max(k, 0)
        return float((residual_mass + self.Q[k]) / self.P[k])


@dataclass
class _Problem:
    p: torch.Tensor
    q: torch.Tensor
    support: torch.Tensor  # p > 0
    p_s: torch.Tensor
    q_s: torch.Tensor
    outside_mass: float  # sum of q where p = 0
    sorted: _Sorted

    @classmethod
    def build(cls, p: torch.Tensor, q: torch.Tensor) -> "_Problem":
        p, q = p.double(), q.double()
        p, q = p / p.sum(), q / q.sum()
        support = p > 0
        p_s, q_s = p[support], q[support]
        return cls(p, q, support, p_s, q_s, float(q[~support].sum()), _Sorted(p_s, q_s))

    # phase 1: lambda in (0, 1]
    def phase1(self, lam: float) -> tuple[torch.Tensor, float]:
        """(pi on the support, t) for a given lambda > 0."""
        upper = self.p_s / lam
        accepted = float(torch.minimum(self.q_s, upper).sum())
        t = self.sorted.t_for(1.0 - accepted)
        return torch.minimum(torch.maximum(self.q_s, t * self.p_s), upper), t

    # phase 2 (and the lambda -> 0 limit): pi = max(q, t p) on the support
    def phase2(self, t: float) -> torch.Tensor:
        return torch.maximum(self.q_s, t * self.p_s)

    def kl_on_support(self, pi_s: torch.Tensor) -> float:
        if bool((pi_s <= 0).any()):
            return math.inf
        return float((self.p_s * (self.p_s.log() - pi_s.log())).sum())


def _bisect(feasible, lo: float, hi: float) -> float:
    """Smallest x in (lo, hi] with feasible(x), given feasible(hi) and monotonicity."""
    for _ in range(SEARCH_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi


def strict_solution(p: torch.Tensor, q: torch.Tensor) -> MentoredSolution:
    """D = 0: the strict rule, computed by the same functions as the strict engine."""
    r = torch.where(q > 0, acceptance_threshold(p, q), torch.ones_like(p))  # q = 0: never drafted
    s, _ = residual_distribution(p, q)
    return MentoredSolution(r, s, float(torch.minimum(p, q).sum()), 0.0)


def mentored_solution(p: torch.Tensor, q: torch.Tensor, kl_bound: float) -> MentoredSolution:
    """The optimal (r, s) for target p, draft q and bound D on KL(p || output); see the module doc."""
    return solve_mentored(p, q, kl_bound)[0]


def solve_mentored(p: torch.Tensor, q: torch.Tensor, kl_bound: float) -> tuple[MentoredSolution, torch.Tensor]:
    """(solution, output distribution pi), pi computed without the round-off of q r + (1 - alpha) s."""
    validate_kl_bound(kl_bound)
    if kl_bound == 0:
        sol = strict_solution(p, q)
        return sol, torch.minimum(p, q) + (1.0 - sol.acceptance) * sol.s
    dtype = p.dtype
    prob = _Problem.build(p, q)
    kl_pair = kl_divergence(prob.p, prob.q)
    if kl_pair <= kl_bound:  # shortcut: the draft itself is within D of the target, accept everything
        return MentoredSolution(torch.ones_like(p), p / p.sum(), 1.0, kl_pair), q.clone()

    # the lambda -> 0 end of phase 1: pi = max(q, t0 p) on the support, nothing outside it
    t0 = prob.sorted.t_for(prob.outside_mass)
    kl_end = prob.kl_on_support(prob.phase2(t0)) if t0 > 0 else math.inf
    r = torch.zeros_like(prob.p)
    if kl_end > kl_bound:
        # phase 1: the smallest lambda in (0, 1] with KL <= D (lambda = 1 is the strict rule, KL 0)
        lam = _bisect(lambda x: prob.kl_on_support(prob.phase1(x)[0]) <= kl_bound, 0.0, 1.0)
        pi_s, t = prob.phase1(lam)
        q_s = prob.q_s
        r_s = torch.where(q_s > 0, torch.clamp(prob.p_s / (lam * q_s.clamp(min=1e-300)), max=1.0), torch.ones_like(q_s))
        r[prob.support] = r_s
        r[~prob.support & (prob.q == 0)] = 1.0  # never drafted: any value
    else:
        # phase 2: the smallest t in (0, t0] with KL <= D; leftover mass accepted on the p = 0 tokens
        t = _bisect(lambda x: prob.kl_on_support(prob.phase2(x)) <= kl_bound, 0.0, t0)
        pi_s = prob.phase2(t)
        leftover = max(0.0, 1.0 - float(pi_s.sum()))
        c = min(1.0, leftover / prob.outside_mass) if prob.outside_mass > 0 else 0.0
        r[prob.support] = 1.0
        r[~prob.support] = c
        r[~prob.support & (prob.q == 0)] = 1.0
    excess = torch.zeros_like(prob.p)
    excess[prob.support] = torch.clamp(t * prob.p_s - prob.q_s, min=0.0)
    mass = float(excess.sum())
    acceptance = 1.0 - mass  # = sum q r; 1 - g(t) keeps its precision when alpha is near 1
    s = excess / mass if mass > 1e-15 else prob.p.clone()
    pi = prob.q * r + excess
    return MentoredSolution(r.to(dtype), s.to(dtype), acceptance, kl_divergence(prob.p, pi)), pi.to(dtype)


def mentored_output_distribution(p: torch.Tensor, q: torch.Tensor, kl_bound: float) -> torch.Tensor:
    """pi = q r + (1 - alpha) s: the exact distribution of one mentored step."""
    return solve_mentored(p, q, kl_bound)[1]


@dataclass
class MentoredDecision:
    """One draft token's verdict and what the trace shows about it."""

    accepted: bool
    strict_threshold: float  # min(1, p(x)/q(x))
    threshold: float | None  # r(x) of the mentored solution (None: not computed, a shortcut decided)
    rule: str  # "strict-pass" | "within-bound" | "search" | "strict" (D = 0)
    solution: MentoredSolution | None = None
    kl_pair: float | None = None  # KL(p || q) at this position
    output: torch.Tensor | None = None  # pi, the output distribution of this step (with the solution)


def mentored_decide(p: torch.Tensor, q: torch.Tensor, x: int, u: float, kl_bound: float,
                    always_solve: bool = False) -> MentoredDecision:
    """Accept draft token x iff u <= r(x), using the post's shortcuts.

    With always_solve=False the search is skipped when u already passes the strict threshold
    (r(x) >= min(1, p/q)) and when KL(p || q) <= D (r = 1). With always_solve=True (for the trace)
    the solution is computed anyway; the verdict is the same either way.
    """
    strict = float(acceptance_threshold(p[x], q[x]))
    if kl_bound == 0:
        sol, pi = solve_mentored(p, q, 0.0) if always_solve else (None, None)
        return MentoredDecision(u <= strict, strict, strict, "strict", sol, output=pi)
    if u <= strict and not always_solve:
        return MentoredDecision(True, strict, None, "strict-pass")
    kl_pair = kl_divergence(p, q)
    if kl_pair <= kl_bound and not always_solve:
        return MentoredDecision(True, strict, 1.0, "within-bound", kl_pair=kl_pair)
    sol, pi = solve_mentored(p, q, kl_bound)
    threshold = float(sol.r[x])
    rule = "strict-pass" if u <= strict else ("within-bound" if kl_pair <= kl_bound else "search")
    return MentoredDecision(u <= max(threshold, strict), strict, threshold, rule, sol, kl_pair, pi)


def mentored_one_step_samples(p: torch.Tensor, q: torch.Tensor, kl_bound: float, n: int,
                              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, MentoredSolution]:
    """N independent mentored steps, vectorised: x ~ q, accept iff u <= r(x), else draw from s.

    Draws random numbers in the same order as the strict lab (`lab.one_step_samples`), so D = 0
    gives the very same samples.
    """
    sol = mentored_solution(p, q, kl_bound)
    x = torch.multinomial(q, n, replacement=True, generator=generator)
    u = torch.rand(n, generator=generator, dtype=p.dtype)
    accepted = u <= sol.r.to(p.dtype)[x]
    out = x.clone()
    n_rejected = int((~accepted).sum())
    if n_rejected:
        out[~accepted] = torch.multinomial(sol.s, n_rejected, replacement=True, generator=generator)
    return out, accepted, sol
