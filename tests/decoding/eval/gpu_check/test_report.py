"""docs/gpu.md's benchmark section from a fake bench part (decoding/eval/gpu_check/report.py, goals.py):
the per-category table with the HF peers and the prompts each row used, the before/after of the
static path, and the GPU backend's goals checked explicitly, met, not met or not measured."""

from __future__ import annotations

import copy

from decoding.eval.gpu_check.goals import before_after, check_goals
from decoding.eval.gpu_check.report import merge, render

INFO = {"device": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_gib": 79.1, "bf16": True,
        "driver": "580.1", "cuda": "13.0", "cudnn": 91900, "torch": "2.11.0+cu130", "transformers": "5.24.0",
        "python": "3.12.3", "date": "2026-11-26 16:10 UTC"}
CATS = {"mt_bench": 2, "qa": 2}


def _row(tps, speedup, engine="ours", method="speculative", draft=None, gamma=4, schedule="fixed"):
    return {"engine": engine, "method": method, "draft": draft, "gamma": gamma, "schedule": schedule, "tokens": 256,
            "seconds": 256 / tps, "tokens_per_second": tps, "speedup": speedup,
            "by_category": {"mt_bench": {"tokens_per_second": tps * 0.9, "speedup": speedup * 0.9, "prompts": 2},
                            "qa": {"tokens_per_second": tps * 1.1, "speedup": speedup * 1.1, "prompts": 2}}}


def _job(key, dtype, variants, per_prompt_tps, prompts=4, **extra):
    per_prompt = {f"p{i}": {"autoregressive": [64, 64 / per_prompt_tps]} for i in range(prompts)}
    return {"key": key, "title": key, "status": "ok", "dtype": dtype, "backend": "static", "graphs": True,
            "prompts": prompts, "prompt_categories": CATS, "variants": variants, "per_prompt": per_prompt,
            "greedy_equal": {k: f"{prompts}/{prompts}" for k in variants}, "out": f"runs/gpu-check/bench/{key}",
            "seconds": 12.0, "env": {"SPECDEC_BACKEND": "static", "SPECDEC_CUDA_GRAPHS": "1"}, **extra}


def fake_bench() -> dict:
    ar = _row(320.0, 1.0, method="autoregressive", gamma=None)
    main = {"autoregressive": ar,
            "speculative-distilled-g4": _row(352.0, 1.10, draft="distilled"),
            "speculative-distilled-auto": _row(304.0, 0.95, draft="distilled", schedule="auto"),
            "speculative-feature-g4": _row(400.0, 1.25, draft="feature"),
            "speculative-hybrid-feature-g4": _row(480.0, 1.50, draft="hybrid-feature"),
            "speculative-hybrid-feature-auto": _row(544.0, 1.70, draft="hybrid-feature", schedule="auto"),
            "speculative-prompt-lookup-g4": _row(416.0, 1.30, draft="prompt-lookup")}
    f32 = {"autoregressive": _row(250.0, 1.0, method="autoregressive", gamma=None),
           "speculative-hybrid-feature-g4": _row(300.0, 1.2, draft="hybrid-feature"),
           "speculative-hybrid-feature-auto": _row(310.0, 1.24, draft="hybrid-feature", schedule="auto")}
    compiled = {"autoregressive": _row(330.0, 1.0, method="autoregressive", gamma=None),
                "hf-generate-compiled": _row(300.0, 0.91, engine="hf", method="generate-compiled", gamma=None)}
    eager = {"autoregressive": _row(300.0, 1.0, method="autoregressive", gamma=None),
             "hf-generate": _row(50.0, 0.17, engine="hf", method="generate", gamma=None),
             "hf-assisted-prompt-lookup-default": _row(60.0, 0.2, engine="hf", method="assisted",
                                                       draft="prompt-lookup", schedule="hf-default")}
    jobs = {"half-static": _job("half-static", "bfloat16", main, 320.0, prompts=48),
            "float32-static": _job("float32-static", "float32", f32, 250.0, prompts=48),
            "half-dynamic": _job("half-dynamic", "bfloat16", {"autoregressive": _row(32.0, 1.0, method="autoregressive")},
                                 32.0, prompts=6, env={"SPECDEC_BACKEND": "dynamic", "SPECDEC_CUDA_GRAPHS": "0"}),
            "half-hf-compiled": _job("half-hf-compiled", "bfloat16", compiled, 330.0, prompts=48,
                                     hf_compiled={"compiled": True, "mode": "reduce-overhead", "max_cache_len": 2100,
                                                  "eager_why": None}),
            "half-hf-eager": _job("half-hf-eager", "bfloat16", eager, 300.0, prompts=6)}
    jobs["float32-static"]["greedy_equal"]["speculative-hybrid-feature-auto"] = "47/48"
    return {"status": "ok", "seconds": 250.0, "pair": "default pair", "skipped": [], "budget_s": 360.0,
            "bench_seconds_planned": 270.0, "assumed_tps": {"graphs": 300.0}, "measured_tps": {"graphs": 321.0},
            "plan": [{"job": k, "prompts": j["prompts"], "estimate_s": 50.0} for k, j in jobs.items()],
            "prompts_file": "benchmarks/spec_bench.jsonl", "max_new_tokens": 64, "jobs": jobs,
            "fastest": {"drafter": "hybrid-feature", "gamma": "auto", "speedup": 1.7, "dtype": "bfloat16",
                        "job": "half-static", "default_target": True}}



def test_goals_met_and_not_met_with_their_figures():
    goals = check_goals(fake_bench())
    by = {i: g for i, g in enumerate(goals)}
    assert by[0]["met"] is True and by[0]["value"] == "320.0 tokens/s" and "48 prompts" in by[0]["detail"]
    # plain >= HF's fastest: the smallest ratio of ours over an HF generate() row in its own job
    assert by[1]["met"] is True and by[1]["value"].startswith("1.10x hf-generate-compiled")
    assert "hf-generate 50.0 tokens/s against ours 300.0 (6 prompts, job half-hf-eager)" in by[1]["detail"]
    assert by[2]["met"] is True and by[2]["value"] == "1.70x (its better gamma)"
    assert by[3]["met"] is False and by[3]["value"] == "4/5 variants faster"  # distilled at auto: 0.95x
    assert "speculative-distilled-auto 0.95x" in by[3]["detail"]
    assert by[4]["met"] is False and by[4]["value"] == "1/2 variants equal on every prompt"
    assert "speculative-hybrid-feature-auto 47/48 (48 prompts)" in by[4]["detail"]


def test_goals_without_figures_are_not_measured_and_a_slower_plain_is_not_met():
    assert all(g["met"] is None for g in check_goals({"jobs": {}}))
    bench = fake_bench()
    bench["jobs"]["half-hf-compiled"]["variants"]["hf-generate-compiled"]["tokens_per_second"] = 400.0
    bench["jobs"]["half-static"]["variants"]["autoregressive"]["tokens_per_second"] = 299.0
    goals = check_goals(bench, {"compiled": False, "eager_why": "torch.compile failed (X)"})
    assert goals[0]["met"] is False and goals[1]["met"] is False
    assert "HF's compiled configuration ran eagerly: torch.compile failed (X)" in goals[1]["detail"]
    del bench["jobs"]["half-hf-compiled"]  # only the eager HF peer: the goal is not measured, not met
    assert check_goals(bench)[1]["met"] is None


def test_before_and_after_on_the_prompts_both_jobs_decoded():
    ba = before_after(fake_bench())
    assert ba["prompts"] == 6 and round(ba["dynamic_tps"], 1) == 32.0 and round(ba["static_tps"], 1) == 320.0
    assert round(ba["speedup"], 2) == 10.0
    bench = fake_bench()
    bench["jobs"]["half-dynamic"]["status"] = "failed"
    assert before_after(bench) is None


def test_the_report_has_the_category_table_the_goals_and_the_prompts_per_row():
    text = render(merge(None, INFO, {"bench": fake_bench()}))
    for expected in (
            "| job | variant | precision | prompts | multi-turn | QA | all |",
            "| half-static | speculative-hybrid-feature-auto | bfloat16 | 48 (2, 2) | 489.6 (1.53x) | 598.4 (1.87x) "
            "| **544.0 (1.70x)** |",
            "| half-hf-eager | hf-generate | bfloat16 | 6 (2, 2) |",
            "| half-hf-compiled | hf-generate-compiled | bfloat16 | 48 (2, 2) |",
            "| plain decoding in bfloat16 >= 300 tokens/s | **met** | 320.0 tokens/s |",
            "| every model drafter faster than plain decoding (gamma 4 and auto) | **not met** |",
            "dynamic cache 32.0 tokens/s, static cache + CUDA graphs 320.0 tokens/s: **10.00x**",
            "compiled (torch.compile, mode reduce-overhead), static cache of 2100 tokens",
            "| half-dynamic | half-dynamic | SPECDEC_BACKEND=dynamic, SPECDEC_CUDA_GRAPHS=0 | 6 (~50.0 s) | 6 | 12.0 | n/a | ok |",
            "Fastest drafter in bfloat16 (job half-static): **hybrid-feature** at gamma auto, 1.70x",
            "greedy text equal to our plain decoding's in float32: speculative-hybrid-feature-g4 48/48, "
            "speculative-hybrid-feature-auto 47/48"):
        assert expected in text, expected
    assert "had not finished" not in text


def test_a_part_cut_short_and_failed_or_skipped_jobs_are_said_so():
    bench = copy.deepcopy(fake_bench())
    bench["status"] = "running"
    bench["jobs"]["half-hf-eager"] = {"key": "half-hf-eager", "title": "x", "status": "skipped",
                                      "why": "the time budget was spent (3 s left)"}
    bench["jobs"]["half-hf-compiled"] = {"key": "half-hf-compiled", "title": "x", "status": "failed",
                                         "error": "RuntimeError: boom", "traceback": "Traceback ...\nRuntimeError: boom"}
    text = render(merge(None, INFO, {"bench": bench}))
    assert "**This part had not finished when the report was written**" in text
    assert "| skipped: the time budget was spent (3 s left) |" in text and "| failed: RuntimeError: boom |" in text
    assert "half-hf-compiled failed:" in text
    assert "| plain decoding at least as fast as HF generate()'s fastest configuration | not measured |" in text


def test_a_part_the_budget_skipped_is_said_so():
    text = render(merge(None, INFO, {"ppd": {"status": "skipped", "seconds": 0.0, "why": "the time budget had 3 s left"}}))
    assert "Status: **skipped**" in text and "Skipped: the time budget had 3 s left" in text


def test_a_jobs_graph_tallies_read_in_words():
    from decoding.eval.gpu_check.report import _graph_counts

    assert _graph_counts({"captures": 3, "capture_ms": 120.4, "replays": 50, "eager_passes": 4}) == \
        "3 captured (120 ms), 50 replays, 4 eager passes"
    assert _graph_counts(None) == _graph_counts({}) == "n/a"
