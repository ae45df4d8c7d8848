"""The bench part and the whole check on the CPU (decoding/eval/gpu_check/bench_part.py, jobs.py,
cli.run_check, publish.py): every job on the tiny random target through the benchmark's own driver,
the budget skipping what does not fit, a failing job not stopping the others, the report and the
results JSON written after each job, and their copies in GPU_CHECK_COPY_TO."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from decoding.eval.gpu_check import bench_part, energy_part
from decoding.eval.gpu_check.cli import run_check
from decoding.eval.gpu_check.jobs import BACKEND_ENV, GRAPHS_ENV, TUNING_ENVS, backend_env, named
from decoding.eval.gpu_check.pairs import Pair
from decoding.eval.gpu_check.plan import JOBS
from decoding.eval.gpu_check.publish import MAX_JSON_BYTES, compact_json
from decoding.eval.gpu_check.settings import CheckSettings

from test_report import INFO, fake_bench

CATEGORIES = ("qa", "rag", "math_reasoning")


def _prompts(tmp_path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "category": CATEGORIES[i % 3], "prompt": f"abc abc {i} abc"})
                            + "\n" for i in range(6)))
    return path


def _settings(tmp_path, budget=300.0, **kw) -> CheckSettings:
    return CheckSettings(device="cpu", prompts=_prompts(tmp_path), max_new_tokens=6, budget_s=budget,
                         runs_dir=tmp_path / "runs", started=time.monotonic(), parts=("bench", "energy"), **kw)


def test_the_whole_check_on_the_cpu_with_the_tiny_target(tmp_path, tiny_target_dir, monkeypatch, capsys):
    pair = Pair("tiny pair", str(tiny_target_dir), "prompt-lookup", "tiny")
    monkeypatch.setattr(bench_part, "check_pairs", lambda: ([pair], []))
    monkeypatch.setattr(energy_part, "check_pairs", lambda: ([pair], []))
    back = tmp_path / "back"
    report = tmp_path / "docs" / "gpu.md"
    rc = run_check(["bench", "energy"], _settings(tmp_path, copy_to=back), INFO, report,
                   choice_file=tmp_path / "choice.json")
    assert rc == 0
    data = json.loads((tmp_path / "runs" / "gpu-check.json").read_text())
    bench = data["parts"]["bench"]
    assert bench["status"] == "ok" and [j["status"] for j in bench["jobs"].values()] == ["ok"] * len(JOBS)
    main = bench["jobs"]["half-static"]
    # the tiny target is not the default one: its only drafter is prompt lookup, named in the rows
    assert set(main["variants"]) == {"autoregressive", "speculative-prompt-lookup-g4", "speculative-prompt-lookup-auto"}
    assert main["prompts"] == 6 and main["prompt_categories"] == {"qa": 2, "rag": 2, "math_reasoning": 2}
    # the backend's switches, and the static path's tuning switches as the check's environment sets them
    assert main["env"] == {BACKEND_ENV: "static", GRAPHS_ENV: "1",
                           **{k: os.environ[k] for k in TUNING_ENVS if os.environ.get(k)}}
    assert main["env"].get("SPECDEC_COMPILE") == "0"  # tests/conftest.py sets it
    assert bench["jobs"]["half-dynamic"]["env"] == {BACKEND_ENV: "dynamic", GRAPHS_ENV: "0", "SPECDEC_COMPILE": "0"}
    assert bench["jobs"]["float32-static"]["greedy_equal"] == {k: "6/6" for k in main["variants"]}
    compiled = bench["jobs"]["half-hf-compiled"]
    assert "hf-generate-compiled" in compiled["variants"] and "CUDA only" in compiled["hf_compiled"]["eager_why"]
    assert {"hf-generate", "hf-assisted-prompt-lookup-default"} <= set(bench["jobs"]["half-hf-eager"]["variants"])
    assert set(bench["measured_tps"]) == {"graphs", "dynamic", "hf-compiled", "hf-eager"}
    assert (tmp_path / "runs" / "bench" / "half-static" / "bench.json").is_file()
    assert data["parts"]["energy"]["status"] == "unavailable"  # no NVML or RAPL here
    assert bench["fastest"] is None or not bench["fastest"]["default_target"]  # no GPU claim from a stand-in
    assert not (tmp_path / "choice.json").exists()
    text = report.read_text()
    assert "| half-static | speculative-prompt-lookup-g4 | bfloat16 | 6 (2, 2, 2) |" in text
    assert sorted(p.name for p in back.iterdir()) == ["gpu-check.json", "gpu.md"]
    assert (back / "gpu.md").read_text() == text
    printed = capsys.readouterr().out
    assert "gpu-check: bench job half-static ok (6 prompts" in printed and f"copied to {back}" in printed
    assert BACKEND_ENV not in __import__("os").environ  # the job's backend does not outlive it


def _fake_job(fail: set):
    def run_job(jobs, i, settings, models, rows, deadline, tps, clock=time.monotonic):
        job = jobs[i]
        if job.key in fail:
            raise RuntimeError(f"{job.key} broke")
        row = dict(fake_bench()["jobs"][job.key])
        row["_result"] = {"methods": {}, "speedup": {}}
        return row
    return run_job


def test_a_failing_job_does_not_stop_the_others_and_each_job_is_written_at_once(tmp_path, monkeypatch):
    pair = Pair("default pair", "default", "prompt-lookup", "SmolLM2")
    monkeypatch.setattr(bench_part, "check_pairs", lambda: ([pair], []))
    seen = []
    back = tmp_path / "back"
    report = tmp_path / "gpu.md"

    def bench_runner(settings):
        def progress(part, partial):  # what run_check's progress writes, then what is on disk at that moment
            settings_progress(part, partial)
            seen.append((list(partial["jobs"]), report.read_text(), (back / "gpu-check.json").read_text()))
        settings_progress = settings.progress
        import dataclasses
        return bench_part.run(dataclasses.replace(settings, progress=progress), run_job=_fake_job({"float32-static"}),
                              app_dtype="bfloat16")

    rc = run_check(["bench"], _settings(tmp_path, copy_to=back), INFO, report,
                   runner=lambda part: bench_runner, choice_file=tmp_path / "choice.json")
    assert rc == 0  # a failed job is a finding of the part, which still measured the others
    assert [s[0] for s in seen][:2] == [["half-static"], ["half-static", "float32-static"]]
    first_report, first_json = seen[0][1], json.loads(seen[0][2])
    assert "**This part had not finished when the report was written**" in first_report
    assert "| half-static | autoregressive | bfloat16 | 48 (2, 2) |" in first_report
    assert list(first_json["parts"]["bench"]["jobs"]) == ["half-static"]
    final = json.loads((back / "gpu-check.json").read_text())["parts"]["bench"]
    assert final["jobs"]["float32-static"]["status"] == "failed"
    assert final["jobs"]["float32-static"]["error"] == "RuntimeError: float32-static broke"
    assert [j["status"] for j in final["jobs"].values()].count("ok") == len(JOBS) - 1


def test_the_budget_skips_a_job_that_has_no_room(tmp_path, monkeypatch):
    pair = Pair("default pair", "default", "prompt-lookup", "SmolLM2")
    monkeypatch.setattr(bench_part, "check_pairs", lambda: ([pair], []))
    now = [0.0]

    def slow_job(jobs, i, *args, **kwargs):
        now[0] += 200.0  # every job takes 200 s of a 360 s budget
        return _fake_job(set())(jobs, i, *args, **kwargs)

    settings = _settings(tmp_path, budget=360.0)
    import dataclasses
    settings = dataclasses.replace(settings, started=0.0, parts=("bench",))
    result = bench_part.run(settings, run_job=slow_job, clock=lambda: now[0], app_dtype="bfloat16")
    statuses = {k: j["status"] for k, j in result["jobs"].items()}
    assert statuses["half-static"] == "ok" and statuses["float32-static"] == "ok"
    assert statuses["half-hf-eager"] == "skipped" and "time budget was spent" in result["jobs"]["half-hf-eager"]["why"]
    assert result["fastest"] is None  # the fake jobs measured no drafter


def test_only_the_jobs_asked_for_run(tmp_path, monkeypatch):
    pair = Pair("default pair", "default", "prompt-lookup", "SmolLM2")
    monkeypatch.setattr(bench_part, "check_pairs", lambda: ([pair], []))
    import dataclasses
    settings = dataclasses.replace(_settings(tmp_path), jobs=("half-dynamic", "half-static"))
    result = bench_part.run(settings, run_job=_fake_job(set()), app_dtype="bfloat16")
    assert list(result["jobs"]) == ["half-static", "half-dynamic"] and [p["job"] for p in result["plan"]] == list(
        result["jobs"])


def test_the_results_json_stays_small_and_the_backend_env_is_restored(monkeypatch):
    big = {"device": INFO, "parts": {"bench": {"jobs": {"j": {"per_prompt": {str(i): "x" * 100 for i in range(30000)},
                                                              "variants": {}}}}}}
    text = compact_json(big)
    assert len(text.encode()) <= MAX_JSON_BYTES and "per_prompt" not in text and '"variants"' in text
    monkeypatch.setenv(BACKEND_ENV, "dynamic")
    monkeypatch.delenv(GRAPHS_ENV, raising=False)
    import os
    with backend_env(JOBS[0]) as env:
        assert os.environ[BACKEND_ENV] == "static" and os.environ[GRAPHS_ENV] == "1" and env[BACKEND_ENV] == "static"
    assert os.environ[BACKEND_ENV] == "dynamic" and GRAPHS_ENV not in os.environ


def test_rows_name_their_drafter():
    assert named("speculative-g4", "hybrid-feature") == "speculative-hybrid-feature-g4"
    assert named("speculative-feature-auto", "feature") == "speculative-feature-auto"
    assert named("hf-assisted-default", "prompt-lookup") == "hf-assisted-prompt-lookup-default"
    assert named("autoregressive", None) == "autoregressive"


def test_a_job_past_its_time_share_stops_after_one_prompt_per_category(tmp_path, tiny_target_dir, monkeypatch):
    """The plan is an estimate: a job still running when its share is spent (here: the later jobs' least costs
    take all the time) starts no new prompt once each category has one, and the report says so."""
    from decoding.eval.gpu_check import jobs

    pair = Pair("tiny pair", str(tiny_target_dir), "prompt-lookup", "tiny")
    monkeypatch.setattr(bench_part, "check_pairs", lambda: ([pair], []))
    monkeypatch.setattr(jobs, "later_least_s", lambda *args, **kwargs: 1e9)
    report = tmp_path / "docs" / "gpu.md"
    settings = _settings(tmp_path, jobs=("half-static",))
    rc = run_check(["bench"], settings, INFO, report, choice_file=tmp_path / "choice.json")
    bench = json.loads((tmp_path / "runs" / "gpu-check.json").read_text())["parts"]["bench"]
    assert rc == 0
    main = bench["jobs"]["half-static"]
    assert main["status"] == "ok" and main["prompts"] == 3
    assert main["prompt_categories"] == {"qa": 1, "rag": 1, "math_reasoning": 1}  # taken category by category
    assert main["cut_short"] == {"prompts_done": 3, "prompts_planned": 6, "why": "its time share was spent"}
    assert all(v["tokens"] == 3 * 6 for v in main["variants"].values())
    assert "(stopped after 3 of 6 prompts: its time share was spent)" in report.read_text()
