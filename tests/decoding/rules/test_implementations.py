"""The lab's implementation switch: each implementation's closed form against its Monte Carlo sampler,
the correct rule and exact match equal to p, each mistake measurably away from p where it differs."""

import math

import pytest
import torch

from decoding.rules.examples import EXAMPLES, LARGER, WORKED
from decoding.rules.implementations import (IMPLEMENTATIONS, TOP_K_TARGET, WRONG_Q_TEMPERATURE, get_implementation,
                                            truncate_top_k, warp_temperature)
from decoding.rules.lab import run_sampling_lab

N = 200_000
MISTAKES = [name for name, impl in IMPLEMENTATIONS.items() if not impl.exact]


def tensors(example):
    return torch.tensor(example.p, dtype=torch.float64), torch.tensor(example.q, dtype=torch.float64)


def mc_error(v: int, n: int = N) -> float:
    """A generous bound on TV(empirical, expected) for n draws over v tokens: three times
    E[TV] <= 0.5 * sum sqrt(p(1-p)/n) <= 0.5 * sqrt(v/n)."""
    return 3 * 0.5 * math.sqrt(v / n)


def test_the_examples_are_distributions_and_the_switch_has_the_correct_rule_and_five_mistakes():
    for example in EXAMPLES.values():
        assert len(example.vocab) == len(example.p) == len(example.q)
        assert sum(example.p) == pytest.approx(1, abs=1e-6) and sum(example.q) == pytest.approx(1, abs=1e-6)
    assert 40 <= len(LARGER.vocab) <= 50 and len(set(LARGER.vocab)) == len(LARGER.vocab)
    assert list(IMPLEMENTATIONS)[0] == "correct" and len(MISTAKES) >= 4 and len(IMPLEMENTATIONS) >= 6
    for impl in IMPLEMENTATIONS.values():
        assert impl.label and impl.what.endswith(".") and impl.where.endswith(".")


@pytest.mark.parametrize("example", list(EXAMPLES))
@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_the_sampler_converges_to_the_closed_form(name, example):
    out = run_sampling_lab(*[list(t) for t in (EXAMPLES[example].p, EXAMPLES[example].q)], n=N, seed=3,
                           implementation=name)
    assert sum(out["expected"]) == pytest.approx(1, abs=1e-9)
    assert out["tv_to_expected"] < mc_error(len(out["target"]))
    assert out["acceptance_rate"] == pytest.approx(out["alpha"], abs=0.005)
    assert out["implementation"] == name


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_the_correct_rule_is_within_tv_001_of_p(example):
    out = run_sampling_lab(list(EXAMPLES[example].p), list(EXAMPLES[example].q), n=N, seed=11)
    assert out["tv_to_target"] < 0.01 and out["implementation"] == "correct"
    assert out["expected"] == pytest.approx(list(EXAMPLES[example].p), abs=1e-9)


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_exact_match_is_p_in_distribution_with_acceptance_sum_p_times_q(example):
    p, q = tensors(EXAMPLES[example])
    out = run_sampling_lab(p.tolist(), q.tolist(), n=N, seed=5, implementation="exact-match")
    assert out["expected"] == pytest.approx(p.tolist(), abs=1e-12) and out["exact"]
    assert out["tv_to_target"] < mc_error(len(p))
    assert out["alpha"] == pytest.approx(float((p * q).sum()), abs=1e-12)
    assert out["acceptance_rate"] == pytest.approx(float((p * q).sum()), abs=0.005)
    assert out["alpha"] < out["correct_alpha"]  # exact but slower


@pytest.mark.parametrize("name", MISTAKES)
def test_each_mistake_drifts_from_p_by_its_closed_form_distance(name):
    """On the shipped example where it differs: TV(empirical, p) >= TV(expected, p) - MC error, and that
    distance is far above the Monte Carlo error (so the mistake is visible)."""
    example = next(e for e in (WORKED, LARGER)
                   if get_implementation(name).output_distribution(*tensors(e)).sub(tensors(e)[0]).abs().sum() > 0.02)
    out = run_sampling_lab(list(example.p), list(example.q), n=N, seed=9, implementation=name)
    eps = mc_error(len(example.p))
    assert out["expected_tv_to_target"] > 2 * eps and not out["exact"]
    assert out["tv_to_target"] >= out["expected_tv_to_target"] - eps


def test_the_closed_forms_by_hand_on_the_worked_example():
    p, q = tensors(WORKED)
    get = lambda name: IMPLEMENTATIONS[name].output_distribution(p, q).tolist()  # noqa: E731
    # greedy: "is" (argmax q = 0.5) kept with p/q = 0.8; the 0.2 rejected goes to the residual [0, .5, .5, 0]
    assert get("greedy-draft-softmax-q") == pytest.approx([0.8, 0.1, 0.1, 0.0])
    # resample from p: min(p, q) + (1 - alpha) p with alpha = 0.9
    assert get("resample-from-p") == pytest.approx([0.4 + 0.04, 0.25 + 0.03, 0.15 + 0.02, 0.1 + 0.01])
    # wrong q: drawn from q^(1/T) renormalised, kept with min(1, p/q)
    q_t = q ** (1 / WRONG_Q_TEMPERATURE) / (q ** (1 / WRONG_Q_TEMPERATURE)).sum()
    kept = q_t * torch.clamp(p / q, max=1)
    residual = torch.tensor([0, 0.5, 0.5, 0], dtype=torch.float64)
    assert get("wrong-q") == pytest.approx((kept + (1 - kept.sum()) * residual).tolist())
    assert warp_temperature(q, WRONG_Q_TEMPERATURE).tolist() == pytest.approx(q_t.tolist())
    # four tokens: the top-20 cut changes nothing
    assert get("top20-target") == pytest.approx(p.tolist()) and get("correct") == pytest.approx(p.tolist())


def test_the_top20_cut_keeps_20_tokens_and_loses_the_tail_mass():
    p, _ = tensors(LARGER)
    cut = truncate_top_k(p, TOP_K_TARGET)
    assert int((cut > 0).sum()) == TOP_K_TARGET and float(cut.sum()) == pytest.approx(1)
    tail = float(torch.sort(p, descending=True).values[TOP_K_TARGET:].sum())
    assert 0.5 * float((cut - p).abs().sum()) == pytest.approx(tail)  # TV = the mass cut off


def test_the_same_seed_gives_the_same_samples_and_unknown_names_are_refused():
    a = run_sampling_lab(list(WORKED.p), list(WORKED.q), n=1000, seed=4, implementation="wrong-q")
    b = run_sampling_lab(list(WORKED.p), list(WORKED.q), n=1000, seed=4, implementation="wrong-q")
    assert a["empirical"] == b["empirical"]
    with pytest.raises(ValueError, match="unknown implementation 'nope'; choose one of: correct"):
        run_sampling_lab(list(WORKED.p), list(WORKED.q), implementation="nope")
    with pytest.raises(ValueError, match="lenience 1"):
        run_sampling_lab(list(WORKED.p), list(WORKED.q), lenience=0.5, implementation="exact-match")
