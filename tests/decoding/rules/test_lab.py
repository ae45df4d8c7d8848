"""Monte Carlo exactness of one speculative-sampling step (N >= 200k, fixed seed)."""

import pytest
import torch

from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, run_sampling_lab

N = 200_000
PAIRS = {
    "worked example 004": (EXAMPLE_P, EXAMPLE_Q),
    "q above p/l somewhere": ([0.05, 0.05, 0.6, 0.3], [0.6, 0.3, 0.05, 0.05]),
    "near-equal": ([0.25, 0.25, 0.25, 0.25], [0.2500001, 0.2499999, 0.25, 0.25]),
    "disjoint support": ([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]),
    "vocab 8": ([0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3]),
}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("lenience", [1.0, 0.7, 0.3])
def test_empirical_matches_expected(name, lenience):
    p, q = PAIRS[name]
    out = run_sampling_lab(p, q, lenience=lenience, n=N, seed=7)
    assert out["tv_to_expected"] < 0.01
    assert out["acceptance_rate"] == pytest.approx(out["alpha"], abs=0.01)
    assert all(e <= c + 1e-9 for e, c in zip(out["expected"], out["cap"]))
    if lenience == 1.0:
        assert out["tv_to_target"] < 0.01
        assert out["expected"] == pytest.approx(p, abs=1e-9)


def test_a_wrong_residual_is_caught():
    """The test above can fail: the residual norm(max(0, q - p)) gives the wrong distribution."""

    def wrong_residual(p, q):
        diff = torch.clamp(q - p, min=0.0)
        return diff / diff.sum(), float(diff.sum())

    p, q = PAIRS["worked example 004"]
    out = run_sampling_lab(p, q, n=N, seed=7, residual_fn=wrong_residual)
    assert out["tv_to_target"] > 0.05


def test_residual_null_when_never_rejected():
    out = run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, lenience=0.5, n=1000)
    assert out["residual"] is None and out["acceptance_rate"] == 1.0


@pytest.mark.parametrize("p,q,msg", [
    ([0.5, 0.6], [0.5, 0.5], "sum to 1"),
    ([-0.1, 1.1], [0.5, 0.5], "negative"),
    ([0.5, 0.5], [0.2, 0.3, 0.5], "differ in length"),
])
def test_bad_distributions(p, q, msg):
    with pytest.raises(ValueError, match=msg):
        run_sampling_lab(p, q, n=10)
