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


# ---- trees (choose_shape, update_tree, tree_stopper) ------------------------------------------------------

def _costed_policy(**kw) -> GammaPolicy:
    """auto, with verify passes of 20 ms for one token and 21 ms + 0.5 ms per token beyond two, and model chains
    that draft at 2 ms a token with 40% of their first tokens right."""
    p = GammaPolicy("auto", 4, max_gamma=8, **kw)
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 3, 5):
        p.update(n - 1, n - 1, 0, [0.4] + [0.4] * (n - 2), 0.002 * (n - 1), 0.021 + 0.0005 * (n - 2), n, False)
    return p


def _tree_iteration(p: GammaPolicy, emitted: int, seconds_draft: float, seconds_verify: float, levels: int = 3,
                    fed: int = 7) -> None:
    p.update_tree(emitted, emitted - 1, emitted, levels, seconds_draft, seconds_verify, fed, False)


def test_choose_shape_tries_a_tree_first_then_picks_it_while_its_tokens_per_second_are_best():
    from decoding.trace.source import MODEL_SOURCE

    p = _costed_policy(probe_every=8)
    source, _, shape = p.choose_shape([MODEL_SOURCE])
    assert (source, shape) == (MODEL_SOURCE, "tree")  # no tree measured yet: try one
    chain_value = p._best_chain(p._scored([MODEL_SOURCE]))[0]
    assert 1.0 < chain_value < 1.5
    # trees: 2.6 tokens for 6 ms of drafting and 24 ms of verifying: 2.6 / 0.030 * 0.020 = 1.73 plain steps' worth
    for _ in range(5):
        _tree_iteration(p, 3, 0.006, 0.024)
        _tree_iteration(p, 2, 0.006, 0.024)
        _tree_iteration(p, 3, 0.006, 0.024)
    assert p.tree_value() == pytest.approx(0.020 * p.tree.tokens / p.tree.seconds)
    assert p.tree_value() > chain_value
    shapes = [p.choose_shape([MODEL_SOURCE])[2] for _ in range(18)]
    # the tree, with the model's chain drafted once every probe_every model iterations so its estimate moves
    assert shapes.count("chain") == 2 and shapes.count("tree") == 16, shapes
    assert p.snapshot()["tree"]["value"] == pytest.approx(p.tree_value())


def test_choose_shape_leaves_the_tree_when_its_measured_tokens_per_second_are_not_best():
    from decoding.trace.source import MODEL_SOURCE, DraftSource

    p = _costed_policy(probe_every=100)
    # trees that emit 1.2 tokens for 12 + 30 ms: 0.57 plain steps' worth, below a chain and below a plain step
    for _ in range(10):
        _tree_iteration(p, 1, 0.012, 0.030)
        _tree_iteration(p, 2, 0.012, 0.030)
        _tree_iteration(p, 1, 0.012, 0.030)
        _tree_iteration(p, 1, 0.012, 0.030)
        _tree_iteration(p, 1, 0.012, 0.030)
    assert p.tree_value() < 1.0
    source, gamma, shape = p.choose_shape([MODEL_SOURCE])
    assert (source, shape) == (MODEL_SOURCE, "chain") and gamma >= 1
    # a copy that nearly always matches beats both model shapes
    copy = DraftSource("lookup", match_length=4, start=3, available=8)
    for _ in range(10):
        p.update(8, 8, 8, [1.0] * 8, 1e-5, 0.024, 9, False, source="lookup")
    assert p.choose_shape([copy, MODEL_SOURCE])[::2] == (copy, "chain")
    # a model that never matches and drafts at a plain step's cost: neither shape pays, a plain step
    slow = GammaPolicy("auto", 4, max_gamma=8, probe_every=100)
    slow.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 3, 5):
        slow.update(n - 1, n - 1, 0, [0.0], 0.02 * (n - 1), 0.021 + 0.0005 * (n - 2), n, False)
    for _ in range(5):
        _tree_iteration(slow, 1, 0.040, 0.030)
    assert slow.choose_shape([MODEL_SOURCE]) == (MODEL_SOURCE, 0, "plain")


def test_tree_iterations_feed_the_verify_fit_and_the_per_level_rates():
    p = GammaPolicy("auto", 4, prior_alpha=0.5, prior_weight=1.0)
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (3, 5, 7, 9):  # tree passes only: 21 ms + 1 ms per token beyond two
        p.update_tree(2, 1, 2, 3, 0.009, 0.021 + 0.001 * (n - 2), n, False)
    a, b = p.verify_fit()
    assert a == pytest.approx(0.021) and b == pytest.approx(0.001)
    assert p.tree.t_draft() == pytest.approx(0.003)  # 9 ms over 3 levels
    # each iteration: the first level accepted, the second reached and rejected
    assert p.tree.alpha_first > 0.7 and p.tree.alpha_next < 0.3
    assert p.estimate("model").t_draft() is None  # the chains' per-token draft time is not touched
    # the prefill pass teaches nothing about trees
    before = (p.tree.tokens, p.tree.seconds)
    p.update_tree(2, 1, 2, 3, 0.009, 0.5, 40, True)
    assert (p.tree.tokens, p.tree.seconds) == before
    fixed = GammaPolicy("fixed", 4)
    fixed.update_tree(2, 1, 2, 3, 0.009, 0.03, 7, False)
    assert fixed.tree.iterations == 0 and fixed.tree_stopper() is None


def test_fixed_schedule_shapes_a_model_source_as_a_tree_and_a_copy_as_a_chain():
    from decoding.trace.source import MODEL_SOURCE, DraftSource

    copy = DraftSource("lookup", match_length=3, start=1, available=5)
    fixed = GammaPolicy("fixed", 4)
    assert fixed.choose_shape([MODEL_SOURCE]) == (MODEL_SOURCE, 4, "tree")
    assert fixed.choose_shape([copy, MODEL_SOURCE]) == (copy, 4, "chain")
    assert fixed.choose_shape([]) == (None, 0, "plain")
    assert _costed_policy().choose_shape([MODEL_SOURCE], trees=False)[2] == "chain"


def test_tree_stopper_threshold_and_rule():
    import math

    p = _costed_policy(prior_alpha=0.5, prior_weight=1.0)
    # before any tree: the level cost is the model's per-token draft time (2 ms), the rate the model's alpha
    assert p.tree_threshold() == pytest.approx((0.002 + 0.0005) / 0.020)
    keep = p.tree_stopper()
    assert keep(1, math.log(0.9)) is (p.alpha * 0.9 >= p.tree_threshold())
    # trees at 4 ms a level whose later levels are accepted 60% of the times they are reached
    for _ in range(20):
        p.update_tree(3, 2, 3, 3, 0.012, 0.024, 7, False)
        p.update_tree(3, 2, 2, 3, 0.012, 0.024, 7, False)
    threshold = (0.004 + p.verify_fit()[1]) / 0.020
    assert p.tree_threshold() == pytest.approx(threshold)
    rate = p.tree.alpha_next
    assert 0.5 < rate < 0.9
    keep = p.tree_stopper()
    # the next level is grown while rate * (the best new node's path probability) pays for it
    high, low = 1.5 * threshold / rate, 0.5 * threshold / rate
    assert keep(1, math.log(high)) and keep(2, math.log(high))
    assert not keep(1, math.log(low)) and not keep(2, math.log(low))


def test_a_steep_early_fit_never_prices_a_pass_below_a_one_token_step():
    """Two noisy pass sizes early in a run can fit a slope whose intercept clamps to ~0; a verify pass of
    n >= 2 tokens is still priced at least at the measured one-token step."""
    p = GammaPolicy("auto", 4)
    p.update(0, 0, 0, [], t_draft=0.0, t_verify=0.020, fed_tokens=1, prefill=False)  # a plain step: t_verify(1)
    p.update(1, 1, 1, [0.9], t_draft=0.002, t_verify=0.001, fed_tokens=2, prefill=False)  # 2 tokens, timed too fast
    p.update(4, 4, 4, [0.9] * 4, t_draft=0.008, t_verify=0.060, fed_tokens=5, prefill=False)  # 5 tokens, slow
    a, b = p.verify_fit()
    assert a + 0 * b < 0.020  # the raw fit prices a 2-token pass below a step
    assert p.t_verify(2) == pytest.approx(0.020)
    assert p.t_verify(5) == pytest.approx(a + 3 * b) and p.t_verify(5) > 0.020
