"""The tree replay (decoding/eval/bench/tree_ceiling.py) on hand-written rank vectors and sequences."""

import pytest

from decoding.eval.bench import ceiling as cl
from decoding.eval.bench import tree_ceiling as tc


def test_miss_scale_lifts_top1_to_the_goal():
    assert tc.miss_scale_for(0.36, 0.36) == 1.0
    assert tc.miss_scale_for(0.36, 0.68) == pytest.approx(0.5)
    assert tc.miss_scale_for(0.2, 1.0) == 0.0
    with pytest.raises(ValueError):
        tc.miss_scale_for(0.5, 0.4)  # a weaker draft is not what this models
    with pytest.raises(ValueError):
        tc.miss_scale_for(1.0, 1.0)


def test_chain_keeps_the_leading_top1_depths():
    assert tc.chain_survival([0, 0, 3, 0], 4) == [1.0, 1.0]
    assert tc.chain_survival([0, 0, 0, 0], 3) == [1.0, 1.0, 1.0]  # gamma caps it
    assert tc.chain_survival([2, 0], 2) == []
    # half of each miss rescued: depth 3 (rank 3) survives with 1/2, depth 4 (rank 0) adds nothing more
    assert tc.chain_survival([0, 0, 3, 0], 4, 0.5) == [1.0, 1.0, 0.5, 0.5]
    assert tc.chain_survival([1, 1], 2, 0.5) == [0.5, 0.25]


def test_prefix_probabilities_follow_the_rescue_model():
    assert tc.prefix_probabilities([0, 2, 9], 3, 8) == {(0,): 1.0, (0, 2): 1.0}  # rank 9 >= 8: no node holds it
    probs = tc.prefix_probabilities([0, 2, 9], 3, 8, 0.5)
    assert probs == pytest.approx({(0,): 1.0, (0, 0): 0.5, (0, 2): 0.5, (0, 0, 0): 0.25, (0, 2, 0): 0.25})
    assert tc.prefix_probabilities([0, 2, 9], 1, 8, 0.5) == {(0,): 1.0}  # depth caps it
    # each depth's prefixes share the probability that the vector reaches it
    probs = tc.prefix_probabilities([3, 1, 5], 3, 8, 0.3)
    for d in (1, 2, 3):
        assert sum(p for k, p in probs.items() if len(k) == d) == pytest.approx(1.0)


def test_best_static_tree_is_prefix_closed_and_its_survival_sums_to_the_oracle():
    vectors = [[0, 0], [1, 0], [0, 1]]
    counts = {}
    for v in vectors:
        for k, p in tc.prefix_probabilities(v, 2, 8).items():
            counts[k] = counts.get(k, 0.0) + p
    assert counts == {(0,): 2.0, (1,): 1.0, (0, 0): 1.0, (0, 1): 1.0, (1, 0): 1.0}
    tree = tc.best_static_tree(counts, 3, 2)
    assert tree == [(0,), (1,), (0, 0)]  # ties: the shorter prefix first
    assert tc.best_static_tree(counts, 5, 1) == [(0,), (1,)]  # depth caps it
    survivals = [tc.tree_survival(tc.prefix_probabilities(v, 2, 8), tree) for v in vectors]
    assert survivals == [[1.0, 1.0], [1.0], [1.0]]
    # the expected accepted length = the sum of the tree's frequencies / positions (Sequoia), 4 / 3 here
    assert sum(map(sum, survivals)) / 3 == pytest.approx(sum(counts[k] for k in tree) / 3)
    assert tc.tree_survival(tc.prefix_probabilities([2, 0], 2, 8), tree) == []  # rank 2: not in the tree


def test_tree_survival_under_a_stronger_draft():
    tree = [(0,), (1,), (0, 0)]
    # vector (1, 3): depth 1 in the tree either way; depth 2 only if rank 3 is rescued and rank 1 too (-> (0, 0))
    survival = tc.tree_survival(tc.prefix_probabilities([1, 3], 2, 8, 0.5), tree)
    assert survival == pytest.approx([1.0, 0.25])


def test_draft_cost_interpolates_in_the_context():
    cost = tc.DraftCost({1000: {"tree6,3": 0.2, "chain2": 0.1}, 100: {"tree6,3": 0.4}})
    assert cost.ratio("tree6,3", 100) == 0.4 and cost.ratio("tree6,3", 1000) == 0.2
    assert cost.ratio("tree6,3", 550) == pytest.approx(0.3)
    assert cost.ratio("tree6,3", 10) == 0.4 and cost.ratio("tree6,3", 5000) == 0.2  # clamped
    assert cost.names() == {"tree6,3"}  # chain2 was timed at one context only
    with pytest.raises(ValueError):
        tc.DraftCost({})


def test_scaled_verify_keeps_a_share_of_the_width_cost():
    cost = cl.VerifyCost({100: {1: 10.0, 5: 20.0}})
    assert tc.ScaledVerify(cost, 1.0).ms(5, 100) == 20.0
    assert tc.ScaledVerify(cost, 0.5).ms(5, 100) == 15.0
    assert tc.ScaledVerify(cost, 0.0).ms(5, 100) == 10.0
    assert tc.ScaledVerify(cost, 0.5).ms(1, 100) == 10.0


SEQ = [5, 8, 9, 5, 6, 7, 4, 5, 6, 7]  # as test_ceiling.py: a repeat the copy rules find


@pytest.mark.parametrize("rule", [None, cl.oracle_copy, cl.lookup_rule(4), cl.copy_tree(2, 2)])
def test_expected_replay_equals_the_replay_for_copies_and_plain_steps(rule):
    cost = cl.VerifyCost({0: {1: 10.0, 3: 12.0, 9: 20.0}, 20: {1: 14.0, 9: 30.0}})
    for prompt_length in (2, 3, 5):
        want = cl.replay(SEQ, prompt_length, rule, cost)
        got = tc.expected_replay(SEQ, prompt_length, rule, cost)
        assert (got.tokens, got.iterations) == (want.tokens, want.iterations)
        assert got.rule_ms == pytest.approx(want.rule_ms)
        assert got.autoregressive_ms == pytest.approx(want.autoregressive_ms)


def test_expected_replay_with_a_measured_model():
    cost = cl.VerifyCost({0: {1: 10.0}})
    seq = [1, 2, 3, 4, 5, 6, 7]  # prompt 1 2; the prefill emitted 3; 4 more steps: t = 2..5, last = 6
    out = tc.expected_replay(seq, 2, None, cost, lambda t: (15.0, tc.point_survival(2)))
    # t=2: 2 accepted -> t=5; t=5: nothing left to accept (the last pass emits the last token)
    assert (out.tokens, out.iterations, out.rule_ms, out.autoregressive_ms) == (4, 2.0, 30.0, 40.0)
    # a model that drafts nothing at even positions: a plain step there
    out = tc.expected_replay(seq, 2, None, cost, lambda t: None if t % 2 == 0 else (15.0, [1.0]))
    assert (out.iterations, out.rule_ms) == (3.0, 10.0 + 15.0 + 15.0)  # t=2 plain, t=3 two tokens, t=5 drafts


def test_expected_replay_takes_the_expectation_exactly():
    cost = cl.VerifyCost({0: {1: 10.0}})
    seq = [1, 2, 3, 4, 5, 6, 7]
    out = tc.expected_replay(seq, 2, None, cost, lambda t: (12.0, [0.5]))
    # from the end: ms(5) = 12; ms(4) = 12 + (ms(5) + ms(6)) / 2 = 18; ms(3) = 12 + (18 + 12) / 2 = 27;
    # ms(2) = 12 + (27 + 18) / 2 = 34.5; iterations 1, 1.5, 2.25, 2.875 the same way
    assert out.rule_ms == pytest.approx(34.5)
    assert out.iterations == pytest.approx(2.875)
    assert out.tokens == 4


def test_expected_replay_copies_first_then_the_model():
    cost = cl.VerifyCost({0: {1: 10.0, 2: 10.0, 3: 10.0, 4: 10.0, 5: 10.0}})
    # the copy rule fires at t = 7 (the third 5: copies 6 7 4 5, 2 accepted, the output ends): one pass
    out = tc.expected_replay(SEQ, 7, cl.lookup_rule(4), cost, lambda t: (99.0, []))
    assert (out.iterations, out.rule_ms) == (1.0, 10.0)
    # from t = 4 the copy finds nothing until t = 7: the model runs at 4, 5, 6 (no tokens accepted), then the copy
    out = tc.expected_replay(SEQ, 4, cl.lookup_rule(4), cost, lambda t: (11.0, []))
    assert (out.iterations, out.rule_ms) == (4.0, 3 * 11.0 + 10.0)


def test_expected_replay_matches_a_simulation_of_the_stronger_draft():
    """The exact expectation against sampling the rescue model itself: each rank > 0 becomes 0 with
    probability 1 - s, the tree keeps the longest prefix among its nodes, the replay walks forward."""
    import random

    cost = cl.VerifyCost({0: {1: 10.0, 4: 12.0}})
    seq = list(range(30))  # nothing repeats: the copy rule never fires
    ranks = {t: [(t * 7 + d * 3) % 5 for d in range(3)] for t in range(30)}  # ranks 0..4, fixed per position
    tree, s = [(0,), (1,), (0, 0), (0, 0, 0)], 0.6
    expected = tc.expected_replay(seq, 3, cl.lookup_rule(4), cost,
                                  lambda t: (12.0, tc.tree_survival(tc.prefix_probabilities(ranks[t], 3, 8, s), tree)))
    rng, total, runs = random.Random(1), 0.0, 4000
    for _ in range(runs):
        t, last = 3, len(seq) - 1
        while t < last:
            r = [x if x == 0 or rng.random() < s else 0 for x in ranks[t]]
            k = 0
            while k < 3 and tuple(r[: k + 1]) in tree:
                k += 1
            total += 12.0
            t += min(k, last - t - 1) + 1
    assert total / runs == pytest.approx(expected.rule_ms, rel=0.01)
