"""The inverse-CDF draw: the row's own distribution, never a zero-weight token, seeded and repeatable."""

import pytest
import torch
from scipy.stats import chisquare

from decoding.rules.draw import draw


def _counts(probs: torch.Tensor, n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(probs.shape[0])
    for _ in range(n):
        counts[draw(probs, gen)] += 1
    return counts


@pytest.mark.parametrize("probs", [
    [0.5, 0.25, 0.125, 0.125],
    [0.0, 0.6, 0.0, 0.3, 0.1, 0.0],  # zeros first, inside and last
    [0.05] * 10 + [0.5],
])
def test_draws_follow_the_row_and_skip_zero_weights(probs):
    p = torch.tensor(probs)
    n = 6000
    counts = _counts(p, n)
    assert counts[p == 0].sum() == 0
    keep = p > 0
    assert chisquare(counts[keep].numpy(), (p[keep] * n).numpy()).pvalue > 1e-3


def test_an_unnormalized_row_draws_its_normalized_distribution():
    weights = torch.tensor([2.0, 0.0, 6.0])  # a residual before its normalization
    counts = _counts(weights, 4000, seed=1)
    assert counts[1] == 0
    assert chisquare(counts[[0, 2]].numpy(), [1000.0, 3000.0]).pvalue > 1e-3


def test_a_wrong_distribution_fails_the_same_check():
    # the check above can fail: draws from q judged against another row are rejected
    counts = _counts(torch.tensor([0.5, 0.25, 0.25]), 6000, seed=2)
    assert chisquare(counts.numpy(), [2000.0, 2000.0, 2000.0]).pvalue < 1e-6


def test_one_hot_and_seeded_draws():
    assert draw(torch.nn.functional.one_hot(torch.tensor(7), 49152).float()) == 7
    row = torch.softmax(torch.randn(49152, generator=torch.Generator().manual_seed(3)), -1)
    first = [draw(row, torch.Generator().manual_seed(5)) for _ in range(3)]
    assert len(set(first)) == 1  # the same seed, the same token


def test_a_uniform_at_the_top_of_the_range_draws_the_last_weighted_token(monkeypatch):
    probs = torch.tensor([0.25, 0.75, 0.0])
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.ones(1, dtype=torch.float64))  # u = total
    assert draw(probs) == 1
