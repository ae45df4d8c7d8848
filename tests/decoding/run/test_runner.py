"""A run end to end (`decoding/run/runner.py`) on tiny random models: seeded runs repeat, records are
sane and round-trip through JSON, lean records, the target's perplexity."""

import json
import math

import pytest
import torch

from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import generate, summarize
from decoding.run.trace_file import load_trace_lines

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
test_mjsd = load_test_module("decoding/methods/mjsd/test_mjsd.py")
PROMPT, _tokens = test_speculative.PROMPT, test_speculative._tokens


def test_seeded_runs_repeat_exactly(tiny_pair):
    target, draft = tiny_pair
    config = RunConfig(method="speculative", max_new_tokens=20, sampling=SamplingConfig(1.0), gamma=3,
                       seed=11, stop_at_eos=False)
    a, ra = _tokens(target, draft, config)
    b, rb = _tokens(target, draft, config)
    assert a == b
    assert [d.coin for r in ra for d in r.draft] == [d.coin for r in rb for d in r.draft]
    other = RunConfig(method="speculative", max_new_tokens=20, sampling=SamplingConfig(1.0), gamma=3,
                      seed=12, stop_at_eos=False)
    assert _tokens(target, draft, other)[0] != a


def test_trace_records_are_sane_and_round_trip_json(tiny_pair):
    target, draft = tiny_pair
    config = RunConfig(method="speculative", max_new_tokens=16, sampling=SamplingConfig(0.9), gamma=3, seed=1,
                       stop_at_eos=False)
    records, summary = generate(target, draft, PROMPT, config)
    lines = [json.dumps(r.to_dict()) for r in records] + [json.dumps(summary.to_dict())]
    back, back_summary = load_trace_lines(lines)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in records]
    assert back_summary.to_dict() == summary.to_dict()
    assert summary.target_calls == len(records)  # one pass per iteration, prefill folded into the first
    assert summary.tokens_per_call == pytest.approx(16 / len(records))
    for r in records:
        examined = [d for d in r.draft if d.accepted is not None]
        assert r.accepted_length == sum(1 for d in examined if d.accepted)
        assert len(r.emitted) == r.accepted_length + 1 or r.finished
        for d in r.draft:
            assert 0 <= d.overlap <= 1 + 1e-6 and d.q > 0
            if d.accepted is not None:
                assert d.accepted == (d.coin <= d.threshold)
            assert d.top, "top-k lists present outside lean mode"
        if r.residual is not None:
            assert r.emitted[-1].kind == "correction" and r.emitted[-1].token_id == r.residual.token_id
        assert [n.parent for n in r.tree] == list(range(-1, len(r.draft)))
    assert summary.models["target_weight_bytes"] == target.weight_bytes > 0
    assert summary.models["draft_weight_bytes"] == draft.weight_bytes > 0
    drafted = [r for r in records if r.draft]
    assert summary.mean_accepted == pytest.approx(sum(r.accepted_length for r in drafted) / len(drafted))


def test_lean_mode_skips_top_lists(tiny_pair):
    target, draft = tiny_pair
    config = RunConfig(method="speculative", max_new_tokens=8, gamma=2, lean=True, stop_at_eos=False)
    records, _ = generate(target, draft, PROMPT, config)
    assert all(not d.top for r in records for d in r.draft)
    assert all(not r.next_top for r in records)


@pytest.mark.parametrize("method", ["autoregressive", "speculative"])
def test_target_perplexity_matches_a_fresh_forward(tiny_pair, method):
    """The engine reads perplexity off the logits it already has; check it against one full pass."""
    target, _ = tiny_pair
    records, summary = test_mjsd._run(tiny_pair, method=method, max_new_tokens=10,
                                      sampling=SamplingConfig(0.9, top_k=5), gamma=3, seed=4)
    ids = target.encode_prompt(test_mjsd.PROMPT, chat=False)
    with torch.inference_mode():
        logits = target.model(torch.tensor([ids + summary.token_ids])).logits[0].float()
    logp = torch.log_softmax(logits[len(ids) - 1:-1], dim=-1)
    nll = -logp[torch.arange(len(summary.token_ids)), torch.tensor(summary.token_ids)].mean()
    assert summary.target_perplexity == pytest.approx(math.exp(float(nll)), rel=1e-4)
    again = summarize(records, RunConfig(method=method), test_mjsd.PROMPT, target, None)
    assert again.target_perplexity == summary.target_perplexity


@pytest.mark.parametrize("method", ["speculative", "mentored", "mjsd", "ppd"])
def test_acceptance_per_position_in_each_methods_summary(tiny_pair, method):
    """Chain drafts (speculative, mentored, MJSD's chosen beam) get per-position rates and the histogram;
    PPD's records list a path through a tree, so it gets neither; every drafting method gets vLLM's mean
    acceptance length, 1 + its mean accepted length."""
    records, summary = test_mjsd._run(tiny_pair, method=method, max_new_tokens=12, sampling=SamplingConfig(0.9),
                                      gamma=3, seed=2)
    drafted = [r for r in records if r.draft]
    assert summary.mean_acceptance_length == pytest.approx(1 + summary.mean_accepted)
    if method == "ppd":
        assert summary.acceptance_per_position == [] and summary.acceptance_length_histogram == []
        return
    gamma_max = max(len(r.draft) for r in drafted)
    assert len(summary.acceptance_per_position) == gamma_max
    assert sum(summary.acceptance_length_histogram) == len(drafted)
    assert summary.acceptance_per_position[0] == pytest.approx(
        sum(r.accepted_length >= 1 for r in drafted) / len(drafted))
