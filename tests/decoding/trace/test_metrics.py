"""One definition of each run statistic (`decoding/trace/metrics.py`), on hand-written records."""

import pytest

from decoding.trace.metrics import RunCounts, c_step, c_verify, mean_accepted, measured_alpha_c, tokens_per_call
from decoding.trace.record import (
    ACCEPTED, BONUS, CORRECTION, TARGET, DraftToken, EmittedToken, IterationRecord, Timings
)


def _record(i, drafted, accepted, emitted, target_calls, draft_calls, elapsed, draft_s=0.0, verify_s=0.0,
            overlaps=None):
    overlaps = overlaps or [0.5] * drafted
    draft = [DraftToken(k, 10 + k, "x", 0.5, 0.5, 0.3, 0.9, k < accepted, overlaps[k]) for k in range(drafted)]
    out = [EmittedToken(1, "a", ACCEPTED) for _ in range(accepted)]
    out += [EmittedToken(2, "b", BONUS if accepted == drafted and drafted else CORRECTION if drafted else TARGET)]
    return IterationRecord("speculative", i, 10, drafted, draft, accepted, out[:emitted], None, [], [],
                           Timings(draft_s, verify_s, 0.0), target_calls, draft_calls, 0, elapsed, None, "", False)


def _run():
    r0 = _record(0, 4, 2, 3, target_calls=1, draft_calls=4, elapsed=1.0, draft_s=0.5, verify_s=0.4,
                 overlaps=[0.9, 0.8, 0.1, 0.2])
    r1 = _record(1, 4, 4, 5, target_calls=2, draft_calls=8, elapsed=1.5, draft_s=0.08, verify_s=0.2,
                 overlaps=[1.0, 1.0, 1.0, 1.0])
    r2 = _record(2, 0, 0, 1, target_calls=3, draft_calls=8, elapsed=1.7, verify_s=0.1)
    r0.generated, r1.generated, r2.generated = 3, 8, 9
    return [r0, r1, r2]


def test_counts_and_figures_of_a_run():
    c = RunCounts.from_records(_run())
    assert (c.tokens, c.target_calls, c.iterations, c.drafted_iterations) == (9, 3, 3, 2)
    assert c.tokens_per_call == pytest.approx(3.0)  # correction/bonus tokens included
    assert c.mean_accepted == pytest.approx((2 + 4) / 2)  # per iteration that had a draft
    assert c.alpha == pytest.approx((0.9 + 0.8 + 0.1 + 0.2 + 4.0) / 8)
    assert c.tokens_per_second == pytest.approx(9 / 1.7)
    # per-step costs leave out the first iteration (it also prefilled the prompt)
    assert c.draft_step_seconds == pytest.approx(0.08 / 4)
    assert c.verify_pass_seconds == pytest.approx((0.2 + 0.1) / 2)
    assert c.c_verify == pytest.approx((0.08 / 4) / 0.15)
    twice = c + c
    assert twice.tokens_per_call == c.tokens_per_call and twice.tokens == 18 and twice.alpha == c.alpha


def test_the_two_cost_ratios_and_edge_cases():
    assert c_step(0.01, 0.05) == pytest.approx(0.2)  # draft step / target step (Leviathan's c)
    assert c_verify(0.01, 0.08) == pytest.approx(0.125)  # draft step / verify pass
    assert c_step(None, 0.05) is None and c_step(0.01, 0) is None
    assert mean_accepted(0, 0) is None and tokens_per_call(5, 0) == 0.0
    assert RunCounts.from_records([]).tokens == 0
    alpha, c, how = measured_alpha_c(_run())
    assert alpha == pytest.approx(RunCounts.from_records(_run()).alpha) and c == pytest.approx(0.2 / 1.5 * 1)
    assert "per drafted token" in how
    assert measured_alpha_c(_run()[:1])[1:] == (None, "not enough iterations to time")


def test_source_tally_adds_up_and_reports_per_iteration():
    from decoding.trace.metrics import SourceTally

    a, b = SourceTally(), SourceTally()
    a.add("model", drafted=4, accepted=1, emitted=2, seconds=0.03)
    a.add("lookup", drafted=6, accepted=6, emitted=7, seconds=0.04)
    b.add("model", drafted=2, accepted=0, emitted=1, seconds=0.01)
    rows = (a + b).rows()
    assert rows["model"] == pytest.approx({"iterations": 2, "share": 2 / 3, "drafted_per_iteration": 3.0,
                                           "accepted_per_iteration": 0.5, "tokens_per_iteration": 1.5,
                                           "ms_per_iteration": 20.0})
    assert rows["lookup"]["share"] == pytest.approx(1 / 3) and rows["lookup"]["tokens_per_iteration"] == 7
    assert a.rows()["model"]["iterations"] == 1  # adding made a new tally
    assert not SourceTally() and a


def test_source_key_buckets_lookups_by_match_length():
    from types import SimpleNamespace

    from decoding.drafters.hybrid import HYBRID_MIN_MATCH
    from decoding.trace.metrics import source_key

    def record(source, match=None, draft=(1,)):
        return SimpleNamespace(draft=list(draft), extra={"chain": {"source": source, "match_length": match}})

    assert source_key(record("model")) == "model"
    assert source_key(record("lookup", HYBRID_MIN_MATCH)) == "lookup"
    assert source_key(record("lookup", HYBRID_MIN_MATCH - 1)) == "lookup-short"
    assert source_key(record(None, draft=())) == "none"
    assert source_key(SimpleNamespace(draft=[], extra={})) is None  # a method without draft sources


def test_source_key_of_a_tree_run_names_the_trees_and_the_chains_by_their_bucket():
    from types import SimpleNamespace

    from decoding.trace.metrics import source_key

    def record(shape, source=None, key=None):
        step = {"shape": shape, "source": source, "drafted": 6}
        if key is not None:
            step["source_key"] = key
        return SimpleNamespace(draft=[1], extra={"tree_draft": step})

    assert source_key(record("tree", "model")) == "model-tree"
    assert source_key(record("chain", "model", "model")) == "model"
    assert source_key(record("chain", "lookup", "lookup-short")) == "lookup-short"
    assert source_key(record("chain", "lookup")) == "lookup"  # a trace written before source_key
    assert source_key(record("plain")) == "none"


def test_speed_after_the_first_pass_leaves_the_prefill_out():
    from decoding.trace.metrics import RunCounts

    # 64 tokens in 5 s, of which the first pass (prefill + 1 token) took 1.85 s
    run = RunCounts(tokens=64, seconds=5.0, first_pass_seconds=1.85, first_pass_tokens=1)
    assert run.tokens_per_second_after_first_pass == pytest.approx(63 / 3.15)
    both = run + RunCounts(tokens=32, seconds=1.0, first_pass_seconds=0.2, first_pass_tokens=3)
    assert both.tokens_per_second_after_first_pass == pytest.approx((96 - 4) / (6.0 - 2.05))
    assert RunCounts(tokens=5, seconds=1.0).tokens_per_second_after_first_pass is None  # not timed


def _chain(i, drafted, accepted, gamma=4):
    """A drafting (or, drafted = 0, plain) iteration with one target call, keeping all it emits."""
    r = _record(i, drafted, accepted, accepted + 1, target_calls=i + 1, draft_calls=0, elapsed=0.1 * (i + 1))
    r.gamma = gamma
    return r


def _position_run():
    # gamma 4: a full draft accepted to 2, a short draft (room ran out) of 2 accepted whole, a copy of 6
    # tokens (longer than gamma) accepted to 5, a zero-draft iteration, a full draft rejected at once
    records = [_chain(0, 4, 2), _chain(1, 2, 2), _chain(2, 6, 5), _chain(3, 0, 0), _chain(4, 4, 0)]
    generated = 0
    for r in records:
        generated += len(r.emitted)
        r.generated = generated
    return records


def test_acceptance_per_position_on_hand_written_records():
    from decoding.trace.metrics import (acceptance_length_histogram, acceptance_per_position, iid_acceptance,
                                        mean_acceptance_length)

    records = _position_run()
    # position i: iterations that drafted >= i tokens, and of those the ones that accepted >= i
    # drafted >= i: [4, 4, 3, 3, 1, 1]; accepted >= i: [3, 3, 1, 1, 1, 0]
    assert acceptance_per_position(records) == pytest.approx([3 / 4, 3 / 4, 1 / 3, 1 / 3, 1 / 1, 0 / 1])
    # accepted lengths 0..6 over the 4 iterations that drafted (the zero-draft one is not counted)
    assert acceptance_length_histogram(records) == [1, 0, 2, 0, 0, 1, 0]
    c = RunCounts.from_records(records)
    assert c.positions.drafted == [4, 4, 3, 3, 1, 1] and c.positions.reached == [3, 3, 1, 1, 1, 0]
    assert c.acceptance_per_position == acceptance_per_position(records)
    # vLLM: 1 + accepted draft tokens / drafting iterations
    assert c.mean_acceptance_length == pytest.approx(1 + (2 + 2 + 5 + 0) / 4) == mean_acceptance_length(9, 4)
    assert c.mean_acceptance_length == pytest.approx(1 + c.mean_accepted)
    # the counts agree with the run's other statistics
    assert sum(c.acceptance_length_histogram) == c.drafted_iterations
    assert sum(n * k for n, k in enumerate(c.acceptance_length_histogram)) == c.accepted == sum(c.positions.reached)
    assert sum(c.positions.drafted) == c.drafted_tokens
    # one call per iteration, all emitted kept: tokens = drafting iterations x mean acceptance length + plain steps
    assert c.tokens_per_call * c.target_calls == pytest.approx(
        c.drafted_iterations * c.mean_acceptance_length + (c.iterations - c.drafted_iterations))
    # the i.i.d. reference from the run's alpha (mean overlap, 0.5 in every drafted position here)
    assert c.alpha == pytest.approx(0.5)
    assert c.iid_acceptance == pytest.approx([0.5 ** i for i in range(1, 7)]) == iid_acceptance(0.5, 6)
    assert iid_acceptance(None, 3) == []


def test_position_counts_add_up_and_can_be_left_out():
    from decoding.trace.metrics import PositionTally

    records = _position_run()
    whole = RunCounts.from_records(records)
    halves = RunCounts.from_records(records[:1]) + RunCounts.from_records(records[1:])
    assert halves.positions == whole.positions  # lists of different lengths add position by position
    assert (PositionTally() + whole.positions) == whole.positions
    plain = RunCounts.from_records([_chain(0, 0, 0), _chain(1, 0, 0)])
    assert plain.acceptance_per_position == [] and plain.acceptance_length_histogram == []
    assert plain.mean_acceptance_length is None and plain.iid_acceptance == []
    tree = RunCounts.from_records(records, per_position=False)  # PPD: its records list a path, not a chain
    assert not tree.positions and tree.mean_acceptance_length == whole.mean_acceptance_length
