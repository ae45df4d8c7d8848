"""The gamma schedules (`decoding/drafters/gamma_policy.py`: fixed, auto, heuristic): greedy output
kept, the automatic choice, HF's rule, the draft stopper, per-source estimates."""

import pytest

from decoding.drafters.gamma_policy import GammaPolicy
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode

GREEDY = SamplingConfig(temperature=0.0)


@pytest.mark.parametrize("schedule", ["auto", "heuristic"])
@pytest.mark.parametrize("draft_kind", ["model", "prompt-lookup"])
def test_gamma_schedules_keep_greedy_output(tiny_pair, schedule, draft_kind):
    target, draft = tiny_pair
    draft = draft if draft_kind == "model" else "prompt-lookup"
    ids = target.encode_prompt("abc abc abc hello world, the cat", chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=40, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    config = RunConfig(method="speculative", max_new_tokens=40, sampling=GREEDY, gamma=3, stop_at_eos=False,
                       extra={"gamma_schedule": schedule})
    records = list(decode(target, draft, ids, config))
    assert [t.token_id for r in records for t in r.emitted] == expected
    assert all("gamma_policy" in r.extra for r in records)
    if schedule == "heuristic" and draft_kind == "model":
        assert len({r.gamma for r in records}) > 1  # the schedule moved


def test_auto_policy_choices():
    # drafting that costs as much as the target and never matches: gamma 0 (plain decoding)
    bad = GammaPolicy("auto", 4, probe_every=100)
    for fed in (1, 2, 5, 1, 3):
        bad.update(fed - 1, fed - 1, 0, [0.0] * min(1, fed - 1), 0.02 * (fed - 1), 0.02 + 0.01 * (fed - 1), fed, False)
    assert bad.next_gamma() == 0
    # cheap drafts that nearly always match, verify cost almost flat: a long draft
    good = GammaPolicy("auto", 2, max_gamma=16)
    for fed in (3, 2, 4, 3, 5):
        good.update(fed - 1, fed - 1, fed - 1, [0.99] * (fed - 1), 1e-5 * (fed - 1), 0.02 + 0.0005 * (fed - 1), fed, False)
    assert good.next_gamma() >= 6
    # while at gamma 0 a one-token probe is drafted every probe_every iterations
    probe = GammaPolicy("auto", 4, probe_every=3)
    probe.update(4, 4, 0, [0.0], 0.08, 0.06, 5, False)
    probe.update(1, 1, 0, [0.0], 0.02, 0.021, 2, False)
    chosen = [probe.next_gamma() for _ in range(6)]
    assert chosen.count(1) == 2 and chosen.count(0) == 4


def test_heuristic_policy_matches_hf_rule():
    p = GammaPolicy("heuristic", 5)
    p.update(5, 5, 5, [], 0, 0, 6, False)
    assert p.next_gamma() == 7  # +2 after a full accept
    p.update(7, 7, 3, [], 0, 0, 8, False)
    assert p.next_gamma() == 6  # -1 otherwise
    for _ in range(10):
        p.update(1, 1, 0, [], 0, 0, 2, False)
    assert p.next_gamma() == 1  # never below 1


def test_auto_draft_stopper_threshold_and_rule():
    fixed = GammaPolicy("fixed", 4)
    assert fixed.draft_stopper() is None and fixed.stop_threshold() is None
    p = GammaPolicy("auto", 4, prior_alpha=0.5, prior_weight=1.0)
    assert p.draft_stopper() is None  # nothing measured yet
    # draft step 2 ms per token; single-token pass 20 ms; multi-token passes 30 ms + 1 ms per extra token
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 3, 5):
        p.update(n - 1, n - 1, 0, [], 0.002 * (n - 1), 0.030 + 0.001 * (n - 2), n, False)
    assert p.stop_threshold() == pytest.approx((0.002 + 0.001) / 0.020)  # 0.15
    keep = p.draft_stopper()
    a = p.alpha
    # continue while alpha * prod(confidences) >= 0.15
    assert keep(0, 0.9) == (a * 0.9 >= 0.15)
    keep = p.draft_stopper()
    assert keep(0, 0.5) is (a * 0.5 >= 0.15)
    assert keep(1, 0.5) is (a * 0.25 >= 0.15)


def test_auto_policy_weighs_each_source_by_its_own_estimates():
    from decoding.trace.source import MODEL_SOURCE, DraftSource

    p = GammaPolicy("auto", 4, max_gamma=16, prior_weight=0.5)
    copy = DraftSource("lookup", match_length=3, start=10, available=12)
    # verify passes: 20 ms for one token, 21 ms + 0.5 ms per extra token beyond two
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 5, 9):
        p.update(n - 1, n - 1, 0, [], 0.0, 0.021 + 0.0005 * (n - 2), n, False, source="lookup-short")
    # copies after long matches: first token 60% right, once one is right the next nearly always is
    for _ in range(20):
        p.update(8, 8, 8, [1.0] * 9, 1e-5, 0.024, 9, False, source="lookup")
        p.update(8, 8, 0, [0.0], 1e-5, 0.024, 9, False, source="lookup")
        p.update(8, 8, 8, [1.0] * 9, 1e-5, 0.024, 9, False, source="lookup")
    # the model: 8 ms a token, a poor 15% match
    for _ in range(10):
        p.update(2, 2, 0, [0.15], 0.016, 0.021, 3, False, source="model")
    est = p.estimate("lookup")
    assert est.alpha_first == pytest.approx(2 / 3, abs=0.05) and est.alpha_next > 0.95
    source, gamma = p.choose([copy, MODEL_SOURCE])
    assert source == copy and gamma == 12  # a long copy, capped by what the context holds
    assert p.choose([MODEL_SOURCE]) == (MODEL_SOURCE, 0)  # the model alone does not pay: plain steps
    assert p.snapshot()["sources"]["lookup"]["alpha_next"] > 0.95
    fixed = GammaPolicy("fixed", 4)
    assert fixed.choose([copy, MODEL_SOURCE]) == (copy, 4) and fixed.choose([]) == (None, 0)
