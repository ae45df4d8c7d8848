"""Closed forms of decoding.rules.theory against values computed by hand (Leviathan et al.)."""

import math

import pytest
import torch

from decoding.rules import theory as T

# The worked example (docs/papers.md; p target, q draft).
P4 = [0.4, 0.3, 0.2, 0.1]
Q4 = [0.5, 0.25, 0.15, 0.1]


# --------------------------------------------------------------------------- alpha
def test_alpha_worked_example():
    # min(p, q) = 0.4 + 0.25 + 0.15 + 0.1
    assert T.alpha(torch.tensor(P4), torch.tensor(Q4)) == pytest.approx(0.9, abs=1e-7)
    assert T.alpha(P4, Q4) == pytest.approx(0.9, abs=1e-12)  # lists are accepted (float64)


def test_alpha_identical_and_disjoint():
    p = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    assert T.alpha(p, p) == pytest.approx(1.0)
    assert T.alpha([1.0, 0.0], [0.0, 1.0]) == 0.0


def test_alpha_batched_is_mean_of_beta():
    p = torch.tensor([P4, [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    q = torch.tensor([Q4, [0.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    assert T.alpha(p, q) == pytest.approx((0.9 + 0.0) / 2)


def test_lenient_alpha():
    # l = 1 is the strict rule.
    assert T.lenient_alpha(P4, Q4, 1.0) == pytest.approx(0.9)
    # l = 0.5: min(p/l, q) = min([0.8, 0.6, 0.4, 0.2], q) = q  -> 1.
    assert T.lenient_alpha(P4, Q4, 0.5) == pytest.approx(1.0)
    # l = 0.9: p/l = [0.444.., 0.333.., 0.222.., 0.111..]; min with q = 0.4444 + 0.25 + 0.15 + 0.1
    assert T.lenient_alpha(P4, Q4, 0.9) == pytest.approx(0.4 / 0.9 + 0.25 + 0.15 + 0.1)
    # A.5: = (1/l) sum min(p, l q)
    l = 0.7
    by_a5 = sum(min(pi, l * qi) for pi, qi in zip(P4, Q4)) / l
    assert T.lenient_alpha(P4, Q4, l) == pytest.approx(by_a5)


@pytest.mark.parametrize("l", [0.0, -0.1, 1.5, float("nan")])
def test_lenient_alpha_rejects_bad_lenience(l):
    with pytest.raises(ValueError, match="lenience"):
        T.lenient_alpha(P4, Q4, l)


def test_alpha_rejects_bad_distributions():
    with pytest.raises(ValueError, match="same shape"):
        T.alpha([0.5, 0.5], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="negative"):
        T.alpha([1.2, -0.2], [0.5, 0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        T.alpha([0.5, 0.4], [0.5, 0.5])


# --------------------------------------------------------------------------- eq. (1)
def test_expected_tokens_by_hand():
    # alpha 0.8, gamma 4: (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616
    assert T.expected_tokens_per_call(0.8, 4) == pytest.approx(3.3616, abs=1e-12)
    # alpha 0.5, gamma 2: 1 + 0.5 + 0.25
    assert T.expected_tokens_per_call(0.5, 2) == pytest.approx(1.75, abs=1e-12)


def test_expected_tokens_limits():
    for g in (0, 1, 4, 10, 64):
        assert T.expected_tokens_per_call(1.0, g) == g + 1  # limit at a = 1
        assert T.expected_tokens_per_call(1.0 - 1e-13, g) == pytest.approx(g + 1)
        assert T.expected_tokens_per_call(0.0, g) == 1.0  # only the correction token
    # Near 1 (but outside the 1e-12 window) the value is continuous and below g + 1.
    v = T.expected_tokens_per_call(1.0 - 1e-9, 4)
    assert v < 5 and v == pytest.approx(5 - 10e-9, rel=0, abs=1e-12)  # 5 - g(g+1)/2 * eps
    # gamma 0 = plain decoding: one token per call whatever alpha is.
    assert T.expected_tokens_per_call(0.37, 0) == 1.0


def test_expected_accepted_length_is_tokens_minus_one():
    assert T.expected_accepted_length(0.8, 4) == pytest.approx(2.3616, abs=1e-12)
    for a in (0.0, 0.3, 0.9, 1.0):
        for g in (0, 1, 5):
            assert T.expected_accepted_length(a, g) == pytest.approx(T.expected_tokens_per_call(a, g) - 1)
    assert T.expected_accepted_length(1.0, 7) == 7
    assert T.expected_accepted_length(0.0, 7) == 0


def test_expected_tokens_matches_capped_geometric_simulation():
    # Section 3.1: tokens per run = capped geometric with success prob 1 - alpha, cap gamma + 1.
    g, a, n = 3, 0.6, 200_000
    gen = torch.Generator().manual_seed(0)
    accept = torch.rand(n, g, generator=gen) < a
    accepted = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)  # longest accepted prefix
    assert float((accepted + 1).double().mean()) == pytest.approx(T.expected_tokens_per_call(a, g), abs=0.01)


# --------------------------------------------------------------------------- Theorem 3.8
def test_improvement_by_hand():
    assert T.improvement_factor(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4, abs=1e-12)  # 2.4011...
    assert T.improvement_factor(0.8, 4, 0.1) == pytest.approx(2.40114, abs=1e-5)
    assert T.improvement_factor(0.8, 4, 0.0) == pytest.approx(3.3616)
    assert T.improvement_factor(0.3, 0, 0.5) == 1.0  # plain decoding


def test_improvement_limits():
    assert T.improvement_factor(1.0, 4, 0.25) == pytest.approx(5 / 2)
    assert T.improvement_factor(0.0, 4, 0.25) == pytest.approx(1 / 2)  # slower than plain decoding


def test_corollary_3_9_gamma_one():
    # With gamma = 1 the factor is (1 + alpha) / (1 + c): an improvement iff alpha > c.
    for a, c in [(0.5, 0.1), (0.2, 0.3), (0.9, 0.0)]:
        assert T.improvement_factor(a, 1, c) == pytest.approx((1 + a) / (1 + c))


def test_paper_values():
    # Section 3.6: a bigram draft with alpha ~ 0.2 and negligible c gives ~1.25X at gamma = 3.
    assert T.improvement_factor(0.2, 3, 0.0) == pytest.approx((1 - 0.2**4) / 0.8)
    assert round(T.improvement_factor(0.2, 3, 0.0), 2) == 1.25
    # Negligible-cost drafts are bounded by 1 / (1 - alpha) (section 3.6).
    assert T.improvement_factor(0.2, 10, 0.0) < 1 / 0.8
    assert T.improvement_factor(0.2, 64, 0.0) == pytest.approx(1 / 0.8)
    # Appendix A.5 (temperature 0, lenience 1, 0.5, 0.3, 0.1): alpha 0.75, 0.75, 0.8, 0.87 with
    # c = 0.015 and gamma = 8 give 3.3X, 3.3X, 3.9X, 4.9X.
    for a, expected in [(0.75, 3.3), (0.8, 3.9), (0.87, 4.9)]:
        by_hand = (1 - a**9) / ((1 - a) * (8 * 0.015 + 1))
        assert T.improvement_factor(a, 8, 0.015) == pytest.approx(by_hand)
        assert round(T.improvement_factor(a, 8, 0.015), 1) == expected


# Table 1 of the paper (c = c_hat = 0): alpha, gamma, operations, speed. The stored text of
# Our copy of Leviathan et al. lost its numbers; each row is also recomputed by hand here.
TABLE_1 = [
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
]


@pytest.mark.parametrize("a,g,ops,speed", TABLE_1)
def test_table_1(a, g, ops, speed):
    tokens = (1 - a ** (g + 1)) / (1 - a)
    assert T.improvement_factor(a, g, 0.0) == pytest.approx(tokens)
    assert T.ops_increase(a, g, 0.0) == pytest.approx((g + 1) / tokens)
    assert T.improvement_factor(a, g, 0.0) == pytest.approx(speed, abs=0.005)
    assert T.ops_increase(a, g, 0.0) == pytest.approx(ops, abs=0.005)


# --------------------------------------------------------------------------- optimal gamma
def _brute_force(a, c, max_gamma=64):
    best_g, best = None, -1.0
    for g in range(1, max_gamma + 1):
        v = (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1)) if a < 1 else (g + 1) / (g * c + 1)
        if v > best + 1e-12:
            best_g, best = g, v
    return best_g


@pytest.mark.parametrize(
    "a,c", [(0.8, 0.1), (0.6, 0.05), (0.9, 0.02), (0.5, 0.3), (0.95, 0.01), (0.3, 0.01), (0.99, 0.001)]
)
def test_optimal_gamma_brute_force(a, c):
    g = T.optimal_gamma(a, c)
    assert g == _brute_force(a, c)
    best = T.improvement_factor(a, g, c)
    assert all(T.improvement_factor(a, k, c) <= best for k in range(1, 65))


def test_optimal_gamma_by_hand():
    # alpha 0.8, c 0.1: factors 1.636, 2.033, 2.271, 2.401, 2.460, 2.470, 2.448 for g = 1..7.
    assert T.optimal_gamma(0.8, 0.1) == 6
    assert T.improvement_factor(0.8, 6, 0.1) == pytest.approx((1 - 0.8**7) / (0.2 * 1.6))


def test_optimal_gamma_edges():
    assert T.optimal_gamma(1.0, 0.0) == 64  # always accepted, free draft: as long as allowed
    assert T.optimal_gamma(1.0, 0.0, max_gamma=5) == 5
    assert T.optimal_gamma(0.0, 0.0) == 1  # all factors equal 1: the tie goes to the smallest
    assert T.optimal_gamma(0.0, 0.5) == 1
    assert T.optimal_gamma(0.5, 2.0) == 1  # draft slower than the target: still searched over >= 1
    with pytest.raises(ValueError):
        T.optimal_gamma(0.5, 0.1, max_gamma=0)


# --------------------------------------------------------------------------- Theorem 3.11
def test_ops_increase_by_hand():
    # alpha 0.8, gamma 4, c_hat 0.05: (4*0.05 + 4 + 1) / 3.3616 = 5.2 / 3.3616
    assert T.ops_increase(0.8, 4, 0.05) == pytest.approx(5.2 / 3.3616)
    assert T.ops_increase(0.8, 4, 0.0) == pytest.approx(5 / 3.3616)
    assert T.ops_increase(1.0, 4, 0.0) == 1.0  # every guess accepted: nothing wasted
    assert T.ops_increase(1.0, 4, 0.5) == pytest.approx((2 + 5) / 5)
    assert T.ops_increase(0.0, 4, 0.0) == 5.0  # every guess rejected
    assert T.ops_increase(0.5, 0, 0.3) == 1.0  # plain decoding


# --------------------------------------------------------------------------- measured model
def test_measured_equals_theorem_when_verify_costs_one_step():
    t_target = 0.040
    for a, g, c in [(0.8, 4, 0.1), (0.5, 2, 0.3), (1.0, 5, 0.05), (0.0, 3, 0.2)]:
        m = T.measured_improvement(a, g, t_draft_step=c * t_target, t_target_step=t_target, t_verify=t_target)
        assert m == pytest.approx(T.improvement_factor(a, g, c))


def test_measured_by_hand_with_cpu_verify_cost():
    # 5-token verify costs 1.6x one step: alpha .8, gamma 4, t_draft 4 ms, t_target 40 ms.
    m = T.measured_improvement(0.8, 4, 0.004, 0.040, 0.064)
    assert m == pytest.approx(3.3616 / (4 * 0.004 + 0.064) * 0.040)  # = 1.6808
    assert m == pytest.approx(1.6808)
    assert T.verify_cost_ratio(0.064, 0.040) == pytest.approx(1.6)


def test_measured_rejects_bad_times():
    with pytest.raises(ValueError, match="t_target_step"):
        T.measured_improvement(0.8, 4, 0.004, 0.0, 0.05)
    with pytest.raises(ValueError, match="t_verify"):
        T.measured_improvement(0.8, 4, 0.004, 0.04, -1.0)
    with pytest.raises(ValueError, match="t_draft_step"):
        T.measured_improvement(0.8, 4, -0.004, 0.04, 0.05)
    with pytest.raises(ValueError, match="t_verify"):
        T.verify_cost_ratio(0.0, 0.04)


# --------------------------------------------------------------------------- curve + validation
def test_improvement_curve():
    rows = T.improvement_curve(0.8, 0.1, [0, 1, 4])
    assert [r["gamma"] for r in rows] == [0, 1, 4]
    assert rows[0] == {"gamma": 0, "expected_tokens": 1.0, "expected_accepted": 0.0, "improvement": 1.0}
    assert rows[2]["expected_tokens"] == pytest.approx(3.3616)
    assert rows[2]["expected_accepted"] == pytest.approx(2.3616)
    assert rows[2]["improvement"] == pytest.approx(3.3616 / 1.4)
    with_ops = T.improvement_curve(0.8, 0.1, [4], c_hat=0.0)
    assert with_ops[0]["ops_increase"] == pytest.approx(5 / 3.3616)
    assert len(T.improvement_curve(0.5, 0.1)) == 17  # default gammas 0..16


@pytest.mark.parametrize("bad", [-0.1, 1.1, float("nan"), "0.5", None, True])
def test_bad_alpha(bad):
    with pytest.raises(ValueError, match="alpha"):
        T.expected_tokens_per_call(bad, 3)
    with pytest.raises(ValueError, match="alpha"):
        T.improvement_factor(bad, 3, 0.1)


@pytest.mark.parametrize("bad", [-1, 2.5, 3.0, "4", None, True])
def test_bad_gamma(bad):
    with pytest.raises(ValueError, match="gamma"):
        T.expected_tokens_per_call(0.5, bad)
    with pytest.raises(ValueError, match="gamma"):
        T.ops_increase(0.5, bad, 0.1)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), math.inf])
def test_bad_c(bad):
    with pytest.raises(ValueError, match="c"):
        T.improvement_factor(0.5, 3, bad)
    with pytest.raises(ValueError, match="c_hat"):
        T.ops_increase(0.5, 3, bad)
    with pytest.raises(ValueError, match="c"):
        T.optimal_gamma(0.5, bad)


def test_two_rate_expected_tokens():
    from decoding.rules import theory

    assert theory.expected_tokens_two_rates(0.6, 0.6, 4) == pytest.approx(theory.expected_tokens_per_call(0.6, 4))
    assert theory.expected_tokens_two_rates(0.5, 1.0, 3) == pytest.approx(2.5)  # 1 + 0.5 * 3
    assert theory.expected_tokens_two_rates(0.2, 0.9, 0) == 1.0
    # the cost model with two rates: tokens per second of the pass times the target step
    assert theory.measured_improvement(0.5, 3, 0.001, 0.02, 0.025, alpha_next=1.0) == pytest.approx(2.5 * 0.02 / 0.028)
    assert theory.measured_improvement(0.6, 4, 0.001, 0.02, 0.025, alpha_next=0.6) == pytest.approx(
        theory.measured_improvement(0.6, 4, 0.001, 0.02, 0.025))
