"""MJSD (Qin et al.): joint verification, beam search vs brute force, tau extremes, trace; target perplexity."""

import json
import math

import pytest
import torch

from decoding.lm.cached_lm import CachedLM
from decoding.methods.mjsd.joint import beam_draft, joint_verify, likelihood_sampling, select_expansions
from decoding.run.runner import decode, generate, summarize
from decoding.methods.base import RunConfig
from decoding.run.trace_file import load_trace_lines
from decoding.rules.warp import SamplingConfig, warp_logits

PROMPT = "the cat sat on"


def _run(pair, method="mjsd", **kw):
    target, draft = pair
    extra = kw.pop("extra", {})
    config = RunConfig(method=method, stop_at_eos=False, extra=extra, **kw)
    return generate(target, draft, PROMPT, config)


# --- pure functions -------------------------------------------------------------------------------

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


# --- end to end on the tiny pair ----------------------------------------------------------------

def test_tau_one_accepts_nothing_and_is_target_only_decoding(tiny_pair):
    records, summary = _run(tiny_pair, max_new_tokens=12, sampling=SamplingConfig(0.0), gamma=3,
                            extra={"beams": 3, "tau": 1.0})
    assert all(r.accepted_length == 0 for r in records) and summary.tokens_per_call == 1.0
    _, auto = _run(tiny_pair, method="autoregressive", max_new_tokens=12, sampling=SamplingConfig(0.0))
    assert summary.token_ids == auto.token_ids
    assert summary.target_perplexity == pytest.approx(auto.target_perplexity, rel=1e-4)


def test_tau_zero_without_warping_accepts_every_draft_token(tiny_pair):
    records, summary = _run(tiny_pair, max_new_tokens=13, sampling=SamplingConfig(1.0), gamma=4, seed=3,
                            extra={"beams": 2, "tau": 0.0})
    assert all(r.accepted_length == r.gamma == 4 for r in records[:-1])
    assert summary.tokens_per_call > 3


@pytest.mark.parametrize("sampling,sample", [(SamplingConfig(0.0, top_k=20, top_p=0.9), False),
                                             (SamplingConfig(0.8, top_k=20, top_p=0.9), True)])
def test_trace_is_sane_and_round_trips(tiny_pair, sampling, sample):
    records, summary = _run(tiny_pair, max_new_tokens=14, sampling=sampling, gamma=3, seed=2,
                            extra={"beams": 3, "tau": 0.1, "beam_sample": sample})
    assert len(summary.token_ids) == 14 and summary.stop_reason == "max_new_tokens"
    assert summary.target_perplexity is not None and summary.target_perplexity >= 1.0
    for r in records:
        m = r.extra["mjsd"]
        k = len(r.draft)
        assert len(m["prefixes"]) == k and m["chosen_beam"] == [d.token_id for d in r.draft]
        passing = [x["length"] for x in m["prefixes"] if x["passes"]]
        assert m["eta"] == r.accepted_length == (max(passing) if passing else 0)
        assert all((x["ratio"] > m["tau"]) == x["passes"] and 0 <= x["ratio"] <= 1 for x in m["prefixes"])
        assert m["kept"] == [t.token_id for t in r.emitted[: m["eta"]]] or r.finished
        assert [d.accepted for d in r.draft] == [i < m["eta"] for i in range(k)]
        assert r.tree[0].kind == "root" and all(n.kind == "beam" for n in r.tree[1:])
        for n in r.tree[1:]:
            assert r.tree[n.parent].depth == n.depth - 1 and n.score <= 1e-9
        for depth in range(1, k + 1):
            level = [n for n in r.tree if n.depth == depth]
            assert 1 <= len(level) <= 3
            assert [n.score for n in level] == sorted((n.score for n in level), reverse=True)
        assert sum(n.accepted for n in r.tree[1:]) == m["eta"]
        assert len(r.extra["target_logprobs"]) == len(r.emitted)
    lines = [json.dumps(r.to_dict()) for r in records] + [json.dumps(summary.to_dict())]
    back, back_summary = load_trace_lines(lines)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in records]
    assert back_summary.target_perplexity == summary.target_perplexity


@pytest.mark.parametrize("extra,msg", [({"beams": 0}, "beams"), ({"beams": 9}, "beams"), ({"beams": 2.5}, "beams"),
                                       ({"tau": 1.5}, "tau"), ({"tau": -0.1}, "tau")])
def test_settings_are_validated(tiny_pair, extra, msg):
    target, draft = tiny_pair
    config = RunConfig(method="mjsd", extra=extra)
    with pytest.raises(ValueError, match=msg):
        decode(target, draft, [5, 6, 7], config)


def test_mjsd_needs_a_draft_model(tiny_pair):
    target, _ = tiny_pair
    with pytest.raises(ValueError, match="draft model"):
        decode(target, None, [5, 6, 7], RunConfig(method="mjsd"))


@pytest.mark.parametrize("method", ["autoregressive", "speculative"])
def test_target_perplexity_matches_a_fresh_forward(tiny_pair, method):
    """The engine reads perplexity off the logits it already has; check it against one full pass."""
    target, _ = tiny_pair
    records, summary = _run(tiny_pair, method=method, max_new_tokens=10, sampling=SamplingConfig(0.9, top_k=5),
                            gamma=3, seed=4)
    ids = target.encode_prompt(PROMPT, chat=False)
    with torch.inference_mode():
        logits = target.model(torch.tensor([ids + summary.token_ids])).logits[0].float()
    logp = torch.log_softmax(logits[len(ids) - 1:-1], dim=-1)
    nll = -logp[torch.arange(len(summary.token_ids)), torch.tensor(summary.token_ids)].mean()
    assert summary.target_perplexity == pytest.approx(math.exp(float(nll)), rel=1e-4)
    again = summarize(records, RunConfig(method=method), PROMPT, target, None)
    assert again.target_perplexity == summary.target_perplexity
