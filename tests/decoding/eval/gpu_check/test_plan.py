"""gpu-check's time budget (decoding/eval/gpu_check/plan.py): the costs, the prompts that fit, the
plan of every job, and prompts spread over the categories."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from decoding.eval.gpu_check.plan import (ASSUMED_TPS, COMPILE_S, JOBS, LOAD_S, PART_RESERVE_S, Job, fit_prompts,
                                          job_cost, next_prompts, per_prompt_s, pick_prompts, plan_jobs, reserve_after)

TPS = {"graphs": 320.0, "dynamic": 32.0, "hf-eager": 64.0, "hf-compiled": 640.0}


@dataclass
class Row:
    id: str
    category: str


ROWS = [Row(f"{c}{i}", c) for c in ("mt", "tr", "su", "qa", "ma", "rag") for i in range(8)]


def test_the_jobs_cover_what_the_gpu_goals_ask_for():
    keys = {j.key: j for j in JOBS}
    main = keys["half-static"]
    assert main.drafts == ("distilled", "feature", "hybrid:feature", "prompt-lookup") and main.gammas == "4,auto"
    assert (main.backend, main.graphs, main.precision, main.want) == ("static", True, "half", 48)
    assert keys["float32-static"].drafts == ("hybrid:feature",) and keys["float32-static"].graphs
    assert (keys["half-dynamic"].backend, keys["half-dynamic"].graphs) == ("dynamic", False)
    assert keys["half-hf-compiled"].hf_compiled and not keys["half-hf-compiled"].hf
    assert keys["half-hf-eager"].hf and keys["half-hf-eager"].drafts == ("distilled", "prompt-lookup")


def test_variant_counts_and_costs():
    main = JOBS[0]
    assert main.variant_counts() == {"graphs": 9, "hf-eager": 0, "hf-compiled": 0}  # plain + 4 drafters x 2 gammas
    eager = JOBS[4]
    assert eager.variant_counts() == {"graphs": 1, "hf-eager": 3, "hf-compiled": 0}  # generate + 2 assisted
    assert per_prompt_s(main, 64, TPS) == pytest.approx(9 * 64 / 320)
    assert per_prompt_s(eager, 64, TPS) == pytest.approx(64 / 320 + 3 * 64 / 64)
    # load + probe (two plain runs) + warm-up (one prompt) + the prompts
    assert job_cost(main, 10, 64, TPS) == pytest.approx(LOAD_S + 2 * 64 / 320 + 11 * 9 * 64 / 320)
    compiled = JOBS[3]
    assert job_cost(compiled, 0, 64, TPS) - job_cost(Job("x", "x", "half", "static", True), 0, 64, TPS) == \
        pytest.approx(COMPILE_S + 64 / 640)


def test_what_a_job_has_spent_before_its_prompts_is_load_probe_and_compile():
    from decoding.eval.gpu_check.plan import spent_before_prompts

    compiled = JOBS[3]
    assert spent_before_prompts(compiled, 64, TPS) == pytest.approx(LOAD_S + 2 * 64 / 320 + COMPILE_S)
    assert job_cost(compiled, 6, 64, TPS) - spent_before_prompts(compiled, 64, TPS) == pytest.approx(
        7 * per_prompt_s(compiled, 64, TPS))


def test_the_prompts_that_fit_stay_between_least_and_want_in_whole_rounds_of_categories():
    main = JOBS[0]
    one = per_prompt_s(main, 64, TPS)
    fixed = job_cost(main, 0, 64, TPS)
    assert fit_prompts(main, 10_000, 64, TPS, 48, 48, 6) == 48
    assert fit_prompts(main, 10_000, 64, TPS, 48, 30, 6) == 30  # --max-prompts caps it
    assert fit_prompts(main, fixed + 40 * one, 64, TPS, 48, 48, 6) == 36  # 40 fit: 6 rounds of 6 categories
    assert fit_prompts(main, 1.0, 64, TPS, 48, 48, 6) == 6  # no time: one prompt per category
    slow = {**TPS, "graphs": 30.0}  # the static path not there: 9 variants at 30 tokens/s
    assert fit_prompts(main, 150.0, 64, slow, 48, 48, 6) == 6 < main.least
    assert fit_prompts(main, 1.0, 64, TPS, 5, 48, 6) == 5  # a file with fewer prompts


def test_the_plan_keeps_every_later_jobs_least_and_gives_the_rest_in_order():
    roomy = plan_jobs(JOBS, 10_000, 64, TPS, 48, 48, 6)
    assert [p["prompts"] for p in roomy] == [48, 48, 12, 48, 12]
    tight = plan_jobs(JOBS, 200, 64, TPS, 48, 48, 6)
    assert [p["job"] for p in tight] == [j.key for j in JOBS]
    assert all(p["prompts"] >= 6 for p in tight)
    assert sum(p["estimate_s"] for p in tight) <= 200 + 1
    assert tight[0]["prompts"] < 48  # the first job gave up prompts so that the later ones run
    # before each job, what is left decides: a job that ran long leaves its followers their least
    assert next_prompts(JOBS, 1, 0.0, 64, TPS, 48, 48, 6) == 6


def test_the_assumed_speeds_fit_the_default_budget_with_the_reserves():
    bench = 360 - reserve_after(["bench", "energy", "tests", "ppd"], "bench")
    assert bench == 360 - PART_RESERVE_S["energy"] - PART_RESERVE_S["tests"]
    plan = plan_jobs(JOBS, bench, 64, ASSUMED_TPS, 48, 48, 6)
    assert sum(p["estimate_s"] for p in plan) <= bench + 1
    assert plan[0]["prompts"] >= 24


def test_reserves_are_those_of_the_later_parts_only():
    assert reserve_after(["bench", "energy", "tests"], "tests") == 0
    assert reserve_after(["bench", "tests"], "bench") == PART_RESERVE_S["tests"]
    assert reserve_after(["energy"], "bench") == 0


def test_prompts_are_spread_over_the_categories_in_file_order():
    six = pick_prompts(ROWS, 6)
    assert [r.id for r in six] == ["mt0", "tr0", "su0", "qa0", "ma0", "rag0"]
    twelve = pick_prompts(ROWS, 12)
    assert [r.id for r in twelve][:2] == ["mt0", "mt4"] and len({r.category for r in twelve}) == 6
    eight = pick_prompts(ROWS, 8)  # the first two categories get the extra ones
    assert [sum(r.category == c for r in eight) for c in ("mt", "tr", "su")] == [2, 2, 1]
    assert pick_prompts(ROWS, 100) == ROWS and pick_prompts(ROWS, 0) == []
    uneven = [Row("a0", "a")] + [Row(f"b{i}", "b") for i in range(5)]
    assert [r.id for r in pick_prompts(uneven, 4)] == ["a0", "b0", "b1", "b3"]  # a category that runs out is passed


def test_prompts_are_taken_category_by_category():
    from types import SimpleNamespace

    from decoding.eval.gpu_check.plan import interleave_categories

    rows = [SimpleNamespace(category=c, i=i) for i, c in enumerate("aaabbc")]
    assert [r.i for r in interleave_categories(rows)] == [0, 3, 5, 1, 4, 2]
    assert interleave_categories([]) == []
