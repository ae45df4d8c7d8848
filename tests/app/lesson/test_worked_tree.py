"""The lesson's worked draft tree (app/lesson/worked_tree.py), its values and its widget: the closed-form
keep chance against a Monte Carlo run of the recursive rule written out here (siblings drawn from q
without replacement, the second tested against the residual), whose output is p; a wrong second test
(against p again) is caught; the measured pass cost is the committed measurement."""

import json

import numpy as np
import pytest

from app import measured
from app.lesson import values, worked_tree
from app.lesson.widgets import render_widget
from decoding.paths import BENCH_RUNS
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q
from tests._student_text import dev_hits, visible_text

N = 200_000


def simulate(siblings: int, second_against_p: bool = False, n: int = N, seed: int = 0):
    """n checks of `siblings` guesses at one position: (how often a guess was kept, the output's histogram).
    Guesses come from q without replacement; guess i is kept iff u <= min(1, p_i/q_i), p_1 the residual
    norm(max(0, p - q)) (or p again, the wrong rule); all rejected: the correction comes from the last
    residual."""
    rng = np.random.default_rng(seed)
    p0, q0 = np.array(EXAMPLE_P), np.array(EXAMPLE_Q)
    kept, out = 0, np.zeros(len(p0))
    for _ in range(n):
        p, q, token = p0, q0, None
        for _i in range(siblings):
            x = rng.choice(len(q), p=q)
            if rng.random() <= min(1.0, p[x] / q[x]):
                token = x
                kept += 1
                break
            residual = np.clip(p - q, 0, None)
            p = p if second_against_p else residual / residual.sum()
            q = q.copy()
            q[x] = 0
            q = q / q.sum()
        if token is None:  # p is the last residual already (the wrong rule: p itself, made a residual here)
            last = np.clip(p - q, 0, None) if second_against_p else p
            token = rng.choice(len(p), p=last / last.sum())
        out[token] += 1
    return kept / n, out / n


@pytest.fixture(scope="module")
def two():
    return simulate(2)


def test_the_keep_chance_of_two_guesses_is_what_the_rule_does(two):
    rate, _ = two
    assert worked_tree.keep_chance(1) == pytest.approx(sum(min(a, b) for a, b in zip(EXAMPLE_P, EXAMPLE_Q)))
    assert worked_tree.keep_chance(2) == pytest.approx(0.98)  # is: 0.5 (0.8 + 0.2 · 0.8); stock, girl, cherry kept
    assert rate == pytest.approx(worked_tree.keep_chance(2), abs=0.003)  # 4.6 standard errors
    assert values.tree_rescue_chance() == pytest.approx((worked_tree.keep_chance(2) - 0.9) / 0.1)


def test_the_tree_still_outputs_p_and_a_wrong_second_test_does_not(two):
    _, out = two
    assert np.abs(out - np.array(EXAMPLE_P)).max() < 0.005
    _, wrong = simulate(2, second_against_p=True, n=60_000)
    assert np.abs(wrong - np.array(EXAMPLE_P)).max() > 0.02  # "is" drawn again in the second place, too often


def test_the_worked_checks_and_the_second_siblings_distributions():
    checked, correction = worked_tree.check(2, 0)
    assert [s.verdict for s in checked] == ["rejected", "accepted"] and correction is None
    assert checked[0].residual == pytest.approx([0, 0.5, 0.5, 0]) and checked[0].residual_mass == pytest.approx(0.1)
    assert [s.verdict for s in worked_tree.check(2, 1)[0]] == ["accepted", "untried"]
    chain, correction = worked_tree.check(1, 0)
    assert [s.verdict for s in chain] == ["rejected"] and correction in ("stock", "girl")
    assert values.tree_threshold(0) == pytest.approx(0.8)
    assert (values.tree_p(1), values.tree_q(1)) == pytest.approx((0.5, 0.5))
    with pytest.raises(ValueError, match="1 or 2 guesses"):
        worked_tree.check(3, 0)


def test_the_widget_draws_the_tree_and_the_chain():
    tree = render_widget({"kind": "tree", "siblings": 2, "seed": 0}).html
    text = " ".join(visible_text(tree).split())
    assert "2nd try" in text and "✗ rejected" in text and "✓ kept" in text
    assert "residual p₁ = norm(max(0, p − q))" in text and "min(1, p₁/q₁)" in text
    assert "the pass goes on to its children" in text
    chain = render_widget({"kind": "tree", "siblings": 1, "seed": 0}).html
    assert "2nd try" not in chain and 'chip chip-correction">' in chain and "ends the iteration" in chain
    assert dev_hits(visible_text(tree + chain)) == []


def test_the_pass_cost_is_the_committed_measurement():
    data = json.loads((BENCH_RUNS / "verify-cost.json").read_text())
    assert values.pass_cost(9) == data["rows"]["bfloat16"]["relative"]["9"]
    assert measured.pass_cost(1) == 1.0
    with pytest.raises(ValueError, match="no measured bfloat16 pass over 4 tokens"):
        measured.pass_cost(4)


def test_run_it_live_runs_a_tree_at_lenience_one():
    from app.controls import control_order
    from app.lesson import content, tab

    chapter = next(ch for ch in content.load(live_keys=control_order()) if ch.widget["kind"] == "tree")
    controls = dict(zip(control_order(), tab.control_values(chapter)))
    assert controls["method"] == "speculative" and controls["draft_tree"] == "auto"
    assert controls["lenience"] == 1.0  # a tree is verified exactly: lenience below 1 is a chain's


def test_the_chapters_speedups_are_the_committed_benchmark_run():
    data = json.loads((BENCH_RUNS / "spec-bench-tree-bfloat16" / "bench.json").read_text())
    tree = "speculative-hybrid-feature-auto-tree16x6"
    assert values.measured_speedup("spec-bench-tree-bfloat16", tree) == data["speedup"][tree]
    with pytest.raises(ValueError, match="has no speedup"):
        measured.speedup("spec-bench-tree-bfloat16", "no-such-variant")
