"""Mentored decoding (Tran-Thien): optimality, the KL bound, D = 0 == strict, Monte Carlo exactness."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from decoding.rules.acceptance import acceptance_threshold, residual_distribution
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, one_step_samples, run_sampling_lab
from decoding.rules.mentored import (
    kl_divergence, mentored_decide, mentored_one_step_samples, mentored_output_distribution, mentored_solution
)

P4 = torch.tensor(EXAMPLE_P, dtype=torch.float64)
Q4 = torch.tensor(EXAMPLE_Q, dtype=torch.float64)


def random_pair(gen, v, zeros=False):
    p = torch.rand(v, generator=gen, dtype=torch.float64) ** 3
    q = torch.rand(v, generator=gen, dtype=torch.float64) ** 3
    if zeros:  # top-k-like supports: some tokens impossible under p, others under q
        p[torch.rand(v, generator=gen) < 0.3] = 0
        q[torch.rand(v, generator=gen) < 0.3] = 0
        p[0] += 0.1
        q[1] += 0.1
    return p / p.sum(), q / q.sum()


def scipy_optimum(p, q, D):
    """max sum_x a(x)  s.t. a <= q, a <= pi, KL(p || pi) <= D, pi in the simplex: SLSQP, independent of the engine."""
    p, q = p.numpy(), q.numpy()
    v = len(p)
    sup = p > 0

    def kl(z):
        pi = np.maximum(z[:v], 1e-300)
        return float(np.sum(p[sup] * (np.log(p[sup]) - np.log(pi[sup]))))

    cons = [
        {"type": "eq", "fun": lambda z: np.sum(z[:v]) - 1.0},
        {"type": "ineq", "fun": lambda z: D - kl(z)},
        {"type": "ineq", "fun": lambda z: q - z[v:]},
        {"type": "ineq", "fun": lambda z: z[:v] - z[v:]},
    ]
    best = -1.0
    for start in (p, 0.5 * (p + q), np.where(sup, q + 1e-3, q) / np.where(sup, q + 1e-3, q).sum()):
        z0 = np.concatenate([start, np.minimum(start, q)])
        res = minimize(lambda z: -np.sum(z[v:]), z0, method="SLSQP", constraints=cons,
                       bounds=[(1e-12, 1.0)] * v + [(0.0, 1.0)] * v, options={"maxiter": 500, "ftol": 1e-12})
        z = res.x
        if kl(z) <= D + 1e-7 and abs(z[:v].sum() - 1) < 1e-7 and np.all(z[v:] <= q + 1e-7) and np.all(z[v:] <= z[:v] + 1e-7):
            best = max(best, float(np.sum(z[v:])))
    return best


def test_d_zero_is_strict_exactly():
    sol = mentored_solution(P4, Q4, 0.0)
    assert torch.equal(sol.r, acceptance_threshold(P4, Q4))
    assert torch.equal(sol.s, residual_distribution(P4, Q4)[0])
    assert sol.acceptance == pytest.approx(0.9) and sol.kl == 0.0
    assert torch.allclose(mentored_output_distribution(P4, Q4, 0.0), P4, atol=1e-12)


def test_d_zero_lab_samples_identical_to_strict():
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    strict, acc1 = one_step_samples(P4, Q4, 5000, 1.0, g1)
    ment, acc2, _ = mentored_one_step_samples(P4, Q4, 0.0, 5000, g2)
    assert torch.equal(strict, ment) and torch.equal(acc1, acc2)


def test_worked_example_values():
    """004's pair: strict alpha 0.9; KL(p||q) = 0.02298, so D >= that accepts everything."""
    assert kl_divergence(P4, Q4) == pytest.approx(0.0229755, abs=1e-6)
    assert mentored_solution(P4, Q4, 0.023).acceptance == 1.0
    sol = mentored_solution(P4, Q4, 0.01)
    assert 0.9 < sol.acceptance < 1.0 and sol.kl == pytest.approx(0.01, abs=1e-9)


def test_one_hot_pair_accepts_with_one_minus_exp_minus_d():
    """Temperature 0: target argmax a, draft x != a -> accept x with probability 1 - e^-D."""
    p = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    q = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    for D in (0.1, 0.5, 2.0):
        sol = mentored_solution(p, q, D)
        assert sol.acceptance == pytest.approx(1 - math.exp(-D), abs=1e-9)
        assert float(sol.r[1]) == pytest.approx(1 - math.exp(-D), abs=1e-9)
        assert sol.s[0] == 1.0


@pytest.mark.parametrize("zeros", [False, True])
def test_bound_holds_and_acceptance_monotone(zeros):
    gen = torch.Generator().manual_seed(11)
    for _ in range(50):
        v = int(torch.randint(2, 40, (1,), generator=gen))
        p, q = random_pair(gen, v, zeros)
        strict = float(torch.minimum(p, q).sum())
        last = strict
        for D in (0.0, 1e-3, 0.01, 0.05, 0.2, 1.0, 5.0):
            sol = mentored_solution(p, q, D)
            pi = mentored_output_distribution(p, q, D)
            assert kl_divergence(p, pi) <= D + 1e-9
            assert sol.kl == pytest.approx(kl_divergence(p, pi), abs=1e-9)
            assert float(pi.sum()) == pytest.approx(1.0, abs=1e-9) and bool((pi >= -1e-15).all())
            assert bool((sol.r >= -1e-15).all() and (sol.r <= 1 + 1e-15).all())
            assert sol.acceptance >= strict - 1e-12
            assert sol.acceptance >= last - 1e-9
            assert sol.acceptance == pytest.approx(float((q * sol.r).sum()), abs=1e-12)
            last = sol.acceptance


@pytest.mark.parametrize("zeros", [False, True])
def test_matches_generic_convex_optimizer(zeros):
    gen = torch.Generator().manual_seed(5 + zeros)
    checked = 0
    for _ in range(7):
        v = int(torch.randint(3, 7, (1,), generator=gen))
        p, q = random_pair(gen, v, zeros)
        for D in (0.005, 0.05, 0.3):
            ours = mentored_solution(p, q, D).acceptance
            ref = scipy_optimum(p, q, D)
            if ref < 0:  # the optimizer failed to converge from every start: nothing to compare
                continue
            checked += 1
            assert ours >= ref - 1e-6, (p, q, D, ours, ref)  # never worse than a feasible point
            assert ours == pytest.approx(ref, abs=1e-3), (p, q, D, ours, ref)
    assert checked >= 12


def test_decide_shortcuts_agree_with_full_solution():
    gen = torch.Generator().manual_seed(2)
    for _ in range(60):
        p, q = random_pair(gen, 8, zeros=True)
        x = int(torch.multinomial(q, 1, generator=gen))
        u = float(torch.rand(1, generator=gen, dtype=torch.float64))
        for D in (0.0, 0.02, 0.5):
            fast = mentored_decide(p, q, x, u, D)
            full = mentored_decide(p, q, x, u, D, always_solve=True)
            r_x = max(float(mentored_solution(p, q, D).r[x]), float(acceptance_threshold(p[x], q[x])))
            assert fast.accepted == full.accepted == (u <= r_x)


@pytest.mark.parametrize("D", [0.005, 0.05, 0.5])
def test_monte_carlo_matches_analytic(D):
    out = run_sampling_lab([0.05, 0.05, 0.6, 0.3, 0.0], [0.5, 0.25, 0.05, 0.1, 0.1], n=200_000, seed=1, kl_bound=D)
    assert out["tv_to_expected"] < 0.01
    assert out["acceptance_rate"] == pytest.approx(out["alpha"], abs=0.01)
    assert out["kl_to_target"] <= D + 1e-9
    assert out["alpha"] >= out["strict_alpha"]


def test_lab_validation():
    with pytest.raises(ValueError, match="KL bound"):
        run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, kl_bound=-1)
    with pytest.raises(ValueError, match="lenience"):
        run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, lenience=0.5, kl_bound=0.1)


# --- end to end on the tiny pair ----------------------------------------------------------------
