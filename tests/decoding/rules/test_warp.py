"""warp_logits agrees with transformers' own logits processors (order and top-p boundary)."""

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from decoding.rules.warp import SamplingConfig, argmax_index, warp_logits


@pytest.mark.parametrize("t,k,top_p", [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.9), (0.8, 20, 0.5), (1.0, 3, 0.3)])
def test_matches_transformers_warpers(t, k, top_p):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 50, generator=g) * 3
    procs = LogitsProcessorList([TemperatureLogitsWarper(t)])
    if k:
        procs.append(TopKLogitsWarper(k))
    if top_p < 1:
        procs.append(TopPLogitsWarper(top_p))
    expected = torch.softmax(procs(torch.zeros(4, 1, dtype=torch.long), logits.clone()), dim=-1)
    got = warp_logits(logits, SamplingConfig(t, k, top_p))
    assert torch.allclose(got, expected, atol=1e-6)


def test_temperature_zero_is_one_hot_argmax():
    logits = torch.tensor([0.1, 2.0, -1.0, 1.9])
    assert warp_logits(logits, SamplingConfig(0.0)).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_top_p_keeps_most_likely_token_even_when_tiny():
    logits = torch.tensor([10.0, 0.0, 0.0])
    probs = warp_logits(logits, SamplingConfig(1.0, 0, 0.01))
    assert probs.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("kwargs,msg", [
    ({"temperature": -0.1}, "temperature"),
    ({"top_p": 0.0}, "top-p"),
    ({"top_p": 1.5}, "top-p"),
    ({"top_k": -1}, "top-k"),
])
def test_bad_settings_are_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        SamplingConfig(**kwargs)


def _rows(width: int):
    """Rows where argmax's conventions matter: ties (the first wins), NaN (counted largest, the first wins),
    all -inf, signed zeros, one-hot, the maximum in the last chunk."""
    g = torch.Generator().manual_seed(0)
    yield torch.randn(width, generator=g)
    yield torch.randint(0, 3, (width,), generator=g).float()
    tied = torch.full((width,), float("-inf"))
    tied[[width - 5, 7, width // 2]] = 1.0
    yield tied
    yield torch.full((width,), float("-inf"))
    nan = torch.randn(width, generator=g)
    nan[[width - 3, width // 3]] = float("nan")
    yield nan
    zeros = torch.zeros(width)
    zeros[[0, 5]] = -0.0
    yield zeros
    yield torch.nn.functional.one_hot(torch.tensor(width - 1), width).float()
    yield torch.randn(width, generator=g).bfloat16()


@pytest.mark.parametrize("width", [49152, 8192, 1000, 53])
def test_argmax_index_is_argmax(width):
    for row in _rows(width):
        assert argmax_index(row) == int(row.argmax())


def test_greedy_warp_of_one_row_is_that_row_of_the_matrix():
    logits = torch.randn(5, 49152, generator=torch.Generator().manual_seed(1))
    logits[2, [3, 40000]] = logits[2].max() + 1.0  # a tie
    whole = warp_logits(logits, SamplingConfig(temperature=0.0))
    assert all(torch.equal(warp_logits(logits[i], SamplingConfig(temperature=0.0)), whole[i]) for i in range(5))
