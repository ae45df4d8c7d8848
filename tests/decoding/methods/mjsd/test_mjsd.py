"""MJSD (Qin et al.): joint verification, beam search vs brute force, tau extremes, trace; target perplexity."""

import json

import pytest

from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode, generate
from decoding.run.trace_file import load_trace_lines

PROMPT = "the cat sat on"


def _run(pair, method="mjsd", **kw):
    target, draft = pair
    extra = kw.pop("extra", {})
    config = RunConfig(method=method, stop_at_eos=False, extra=extra, **kw)
    return generate(target, draft, PROMPT, config)


# --- pure functions -------------------------------------------------------------------------------


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
