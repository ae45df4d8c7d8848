"""MJSD's building blocks (`decoding/methods/mjsd/joint.py`): joint verification, and beam search
against brute force."""

import math

import pytest
import torch

from decoding.lm.cached_lm import CachedLM
from decoding.methods.mjsd.joint import beam_draft, joint_verify, likelihood_sampling, select_expansions
from decoding.rules.warp import SamplingConfig, warp_logits

PROMPT = "the cat sat on"


def test_joint_verify_takes_the_largest_passing_prefix_not_the_first_failure():
    # per-token p / q ratios 0.05, then 4, 4: the joint ratio 0.05, 0.2, 0.8 dips below tau at j=1 and recovers
    log_q = [math.log(0.5), math.log(0.5 * 0.2), math.log(0.5 * 0.2 * 0.2)]
    p = [0.025, 0.8, 0.8]
    v = joint_verify(p, log_q, tau=0.1)
    assert v.passes == [False, True, True] and v.eta == 3
    assert v.ratios == pytest.approx([0.05, 0.2, 0.8])
    assert joint_verify(p, log_q, tau=0.5).eta == 3 and joint_verify(p, log_q, tau=0.9).eta == 0
    assert joint_verify([0.025, 0.1, 0.1], log_q, tau=0.1).eta == 0


def test_joint_verify_extremes():
    log_q = [math.log(0.9), math.log(0.9 * 0.9)]
    assert joint_verify([1.0, 1.0], log_q, tau=1.0).eta == 0  # min(1, .) > 1 never holds
    assert joint_verify([1e-300, 1e-300], log_q, tau=0.0).eta == 2  # no underflow: log space
    v = joint_verify([0.0, 1.0], log_q, tau=0.0)
    assert v.passes == [False, False] and v.eta == 0  # p = 0 kills the prefix and every longer one


def test_select_expansions_is_true_top_b():
    gen = torch.Generator().manual_seed(0)
    scores = torch.tensor([-1.0, -1.5, -3.0], dtype=torch.float64)
    logq = torch.log_softmax(torch.randn(3, 11, generator=gen), dim=-1)
    logq[1, 4] = -math.inf  # a token removed by top-k
    parents, tokens, joint = select_expansions(scores, logq, 5)
    brute = sorted(((float(scores[b] + logq[b, v]), b, v) for b in range(3) for v in range(11)), reverse=True)[:5]
    assert [(b, v) for _, b, v in brute] == list(zip(parents, tokens))
    assert joint == pytest.approx([s for s, _, _ in brute])
    few = torch.full((1, 11), -math.inf)
    few[0, 2], few[0, 7] = math.log(0.7), math.log(0.3)
    assert select_expansions(torch.zeros(1, dtype=torch.float64), few, 8)[1] == [2, 7]  # only live tokens


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.0, top_k=20, top_p=0.9)])
def test_beam_search_keeps_true_top_b_vs_brute_force(tiny_pair, sampling):
    _, draft = tiny_pair
    ids = draft.encode_prompt(PROMPT, chat=False)
    lm = CachedLM(draft.model, draft.device, draft.vocab_size)
    B, gamma = 4, 4
    out = beam_draft(lm, ids, gamma, B, sampling)
    assert lm.length == len(ids)  # the single-sequence cache holds the committed context only
    warp = likelihood_sampling(sampling)

    def prefix(t, b):  # tokens of beam b after step t (1-based t)
        toks = []
        while t >= 1:
            beam = out.steps[t - 1][b]
            toks.append(beam.token_id)
            b, t = beam.parent, t - 1
        return toks[::-1]

    previous = [([], 0.0)]
    for t in range(1, gamma + 1):
        cands = []
        for toks, score in previous:
            with torch.inference_mode():
                logits = draft.model(torch.tensor([ids + toks])).logits[0, -1].float()
            logq = warp_logits(logits, warp).double().log()
            for v in torch.nonzero(torch.isfinite(logq)).flatten().tolist():
                cands.append((score + float(logq[v]), toks + [v]))
        cands.sort(key=lambda c: -c[0])
        expected = cands[:B]
        got = [(beam.score, prefix(t, b)) for b, beam in enumerate(out.steps[t - 1])]
        assert [toks for _, toks in got] == [toks for _, toks in expected]
        assert [s for s, _ in got] == pytest.approx([s for s, _ in expected], abs=1e-4)
        previous = [(toks, s) for s, toks in expected]
    assert out.tokens == prefix(gamma, 0)
    assert out.log_q == pytest.approx([out.steps[t][out.path[t]].score for t in range(gamma)])
