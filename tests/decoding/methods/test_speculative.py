"""End to end on tiny random Llama models loaded through the real loader.

Greedy speculative output equals greedy autoregressive output; sampled speculative output has the
target's distribution (chi-square against the exact distribution computed from the tiny target);
a rolled-back cache gives the same logits as a fresh forward pass; seeded runs repeat exactly.
"""


import pytest
import torch
from scipy.stats import chisquare

from decoding.drafters.model import ModelDrafter
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.runner import decode

GREEDY = SamplingConfig(temperature=0.0)
PROMPT = "hello world, the cat"


def _tokens(target, draft, config, prompt=PROMPT):
    ids = target.encode_prompt(prompt, chat=False)
    records = list(decode(target, draft, ids, config))
    return [t.token_id for r in records for t in r.emitted], records


@pytest.mark.parametrize("gamma", [1, 2, 4, 7])
def test_greedy_speculative_equals_autoregressive(tiny_pair, gamma):
    target, draft = tiny_pair
    base = RunConfig(method="autoregressive", max_new_tokens=40, sampling=GREEDY, stop_at_eos=False)
    expected, _ = _tokens(target, None, base)
    spec = RunConfig(method="speculative", max_new_tokens=40, sampling=GREEDY, gamma=gamma, stop_at_eos=False)
    got, records = _tokens(target, draft, spec)
    assert got == expected
    assert len(got) == 40
    # the models disagree sometimes: both outcomes are exercised
    assert any(r.accepted_length < r.gamma for r in records)
    assert any(r.accepted_length > 0 for r in records)


def test_greedy_prompt_lookup_equals_autoregressive(tiny_pair):
    target, _ = tiny_pair
    prompt = "abc abc abc abc abc"
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    spec = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=4, stop_at_eos=False)
    expected, _ = _tokens(target, None, base, prompt)
    got, records = _tokens(target, "prompt-lookup", spec, prompt)
    assert got == expected
    assert any(r.draft for r in records)  # lookup found n-gram matches


def _exact_two_token_distribution(target, prompt_ids, sampling):
    """P(x1, x2 | prompt) under the warped target, computed exactly from the tiny model."""
    with torch.inference_mode():
        logits = target.model(torch.tensor([prompt_ids])).logits[0, -1].float()
        p1 = warp_logits(logits, sampling)
        joint = {}
        for x1 in torch.nonzero(p1).flatten().tolist():
            logits2 = target.model(torch.tensor([prompt_ids + [x1]])).logits[0, -1].float()
            p2 = warp_logits(logits2, sampling)
            for x2 in torch.nonzero(p2).flatten().tolist():
                joint[(x1, x2)] = float(p1[x1] * p2[x2])
    return joint


def test_sampled_speculative_matches_target_distribution(tiny_close_pair):
    check_two_token_distribution(*tiny_close_pair, PROMPT)


def check_two_token_distribution(target, draft, prompt: str, max_new_tokens: int = 2) -> None:
    """Chi-square: the first two emitted tokens of 1200 seeded speculative runs against the target's
    exact two-token distribution (`max_new_tokens` 3 lets the first draft hold two tokens)."""
    sampling = SamplingConfig(temperature=2.0, top_k=4)
    prompt_ids = target.encode_prompt(prompt, chat=False)
    exact = _exact_two_token_distribution(target, prompt_ids, sampling)
    outcomes = sorted(exact)
    counts = dict.fromkeys(outcomes, 0)
    runs = 1200
    rejected = 0
    for seed in range(runs):
        config = RunConfig(method="speculative", max_new_tokens=max_new_tokens, sampling=sampling, gamma=2,
                           seed=seed, stop_at_eos=False, lean=True)
        records = list(decode(target, draft, prompt_ids, config))
        ids = [t.token_id for r in records for t in r.emitted]
        counts[tuple(ids[:2])] += 1
        rejected += sum(1 for r in records for d in r.draft if d.accepted is False)
    assert 100 < rejected < runs * (max_new_tokens - 1)  # the draft agrees with the target only partly
    observed = [counts[o] for o in outcomes]
    expected = [exact[o] * runs for o in outcomes]
    # merge rare cells so the chi-square approximation holds
    obs_m, exp_m, rest_o, rest_e = [], [], 0, 0.0
    for o, e in zip(observed, expected):
        if e >= 5:
            obs_m.append(o)
            exp_m.append(e)
        else:
            rest_o, rest_e = rest_o + o, rest_e + e
    if rest_e > 0:
        obs_m.append(rest_o)
        exp_m.append(rest_e)
    scale = sum(obs_m) / sum(exp_m)
    result = chisquare(obs_m, [e * scale for e in exp_m])
    assert result.pvalue > 1e-3, (result, list(zip(obs_m, exp_m)))


def test_a_wrong_q_is_caught(tiny_close_pair, monkeypatch):
    """The distribution test can fail: a drafter that reports a q other than the one it sampled from."""
    target, draft = tiny_close_pair
    sampling = SamplingConfig(temperature=2.0, top_k=4)
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    exact = _exact_two_token_distribution(target, prompt_ids, sampling)
    p1 = {}
    for (x1, _), v in exact.items():
        p1[x1] = p1.get(x1, 0.0) + v
    original = ModelDrafter.propose

    def lying_propose(self, sequence, gamma, sampling_, generator, keep_going=None, source=None, exact=False):
        proposal = original(self, sequence, gamma, sampling_, generator, keep_going, source, exact)
        proposal.q_rows = torch.full_like(proposal.q_rows, 1.0 / proposal.q_rows.shape[-1])
        return proposal

    monkeypatch.setattr(ModelDrafter, "propose", lying_propose)
    counts = {}
    runs = 600
    for seed in range(runs):
        config = RunConfig(method="speculative", max_new_tokens=2, sampling=sampling, gamma=1,
                           seed=seed, stop_at_eos=False, lean=True)
        ids = [t.token_id for r in decode(target, draft, prompt_ids, config) for t in r.emitted]
        counts[ids[0]] = counts.get(ids[0], 0) + 1
    tv = 0.5 * sum(abs(counts.get(x, 0) / runs - p1.get(x, 0.0)) for x in set(counts) | set(p1))
    assert tv > 0.1


def test_q_in_trace_is_the_distribution_sampled_from(tiny_pair):
    target, draft = tiny_pair
    sampling = SamplingConfig(temperature=0.8, top_k=10, top_p=0.9)
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    gen = torch.Generator().manual_seed(3)
    proposal = drafter.propose(prompt_ids, 4, sampling, gen)
    with torch.inference_mode():
        fresh = draft.model(torch.tensor([prompt_ids + proposal.tokens[:-1]])).logits[0, -4:].float()
    expected_q = warp_logits(fresh, sampling)
    assert torch.allclose(proposal.q_rows, expected_q, atol=1e-5)
    for i, x in enumerate(proposal.tokens):
        assert proposal.q_rows[i, x] > 0
