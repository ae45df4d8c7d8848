"""The headless CLI: JSON contract, and bad input -> one clear stderr line with exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decoding.cli import main
from decoding.rules.implementations import IMPLEMENTATIONS

ROOT = Path(__file__).resolve().parents[2]


def run_cli(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_generate_json_contract(tiny_target_dir, tiny_draft_dir, capsys):
    code, out, err = run_cli([
        "generate", "--prompt", "hello world", "--method", "speculative", "--gamma", "3",
        "--temperature", "0.8", "--seed", "5", "--max-new-tokens", "12", "--ignore-eos",
        "--target", str(tiny_target_dir), "--draft", str(tiny_draft_dir), "--device", "cpu", "--json",
    ], capsys)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    records, summary = lines[:-1], lines[-1]
    assert all(r["summary"] is False for r in records) and summary["summary"] is True
    assert len(summary["token_ids"]) == 12
    assert summary["token_ids"] == [t["token_id"] for r in records for t in r["emitted"]]
    for key in ("text", "iterations", "target_calls", "draft_calls", "mean_accepted", "tokens_per_call",
                "tokens_per_second", "wall_seconds", "energy_joules", "energy_note"):
        assert key in summary
    assert summary["iterations"] == len(records)
    assert summary["target_calls"] == len(records)
    assert summary["tokens_per_call"] == pytest.approx(12 / summary["target_calls"])
    if summary["energy_joules"] is None:
        assert summary["energy_note"]
    # acceptance per draft position (decoding/trace/metrics.py), consistent with the run's other figures
    rates, hist = summary["acceptance_per_position"], summary["acceptance_length_histogram"]
    drafted = [r for r in records if r["draft"]]
    gamma_max = max(len(r["draft"]) for r in drafted)
    assert len(rates) == gamma_max and len(hist) == gamma_max + 1 and sum(hist) == len(drafted)
    assert all(0.0 <= x <= 1.0 for x in rates)
    accepted = sum(r["accepted_length"] for r in records)
    assert summary["mean_acceptance_length"] == pytest.approx(1 + accepted / len(drafted))
    assert summary["mean_acceptance_length"] == pytest.approx(1 + summary["mean_accepted"])
    assert sum(n * k for n, k in enumerate(hist)) == accepted
    for i, rate in enumerate(rates, 1):
        far = [r for r in drafted if len(r["draft"]) >= i]
        assert rate == pytest.approx(sum(r["accepted_length"] >= i for r in far) / len(far))
    # one target call per iteration: the tokens are the drafting iterations' acceptance lengths plus one per plain
    # step, less what the last iteration cut at the token limit (at most gamma_max)
    made = len(drafted) * summary["mean_acceptance_length"] + (len(records) - len(drafted))
    assert made - gamma_max <= summary["tokens_per_call"] * summary["target_calls"] <= made + 1e-9


def test_generate_autoregressive_has_no_mean_accepted(tiny_target_dir, capsys):
    code, out, err = run_cli([
        "generate", "--prompt", "abc", "--method", "autoregressive", "--temperature", "0",
        "--max-new-tokens", "5", "--ignore-eos", "--target", str(tiny_target_dir), "--json",
    ], capsys)
    assert code == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["mean_accepted"] is None and summary["mean_acceptance_length"] is None
    assert summary["acceptance_per_position"] == [] and summary["acceptance_length_histogram"] == []
    assert summary["target_calls"] == 5 and summary["draft_calls"] == 0


def test_sample_json_keys(capsys):
    code, out, _ = run_cli(["sample", "--n", "200000", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    for key in ("target", "draft", "expected", "empirical", "alpha", "acceptance_rate", "residual",
                "tv_to_target", "tv_to_expected"):
        assert key in data
    assert data["alpha"] == pytest.approx(0.9)
    assert data["residual"] == pytest.approx([0, 0.5, 0.5, 0])
    assert data["tv_to_target"] < 0.01


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_sample_implementation_json(name, capsys):
    code, out, _ = run_cli(["sample", "--implementation", name, "--example", "larger", "--n", "20000", "--json"],
                           capsys)
    data = json.loads(out)
    assert code == 0 and data["implementation"] == name and len(data["target"]) == 47
    assert 0 <= data["tv_to_target"] <= 1 and 0 <= data["acceptance_rate"] <= 1
    assert data["acceptance_rate"] == pytest.approx(data["alpha"], abs=0.02)


def test_sample_help_lists_the_implementations(capsys):
    with pytest.raises(SystemExit):
        run_cli(["sample", "--help"], capsys)
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps after hyphens
    for name in IMPLEMENTATIONS:
        assert name in text


def test_theory_json_keys(capsys):
    code, out, _ = run_cli(["theory", "--alpha", "0.8", "--gamma", "4", "--c", "0.1", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["expected_tokens"] == pytest.approx(3.3616)
    assert data["improvement"] == pytest.approx(3.3616 / 1.4)
    assert data["optimal_gamma"] == 6
    assert data["ops_increase"] == pytest.approx(1.6064, abs=1e-4)


GENERATE = ["generate", "--prompt", "hi"]


@pytest.mark.parametrize("args,message", [
    (GENERATE + ["--gamma", "0"], "gamma must be"),
    (GENERATE + ["--gamma", "1000"], "gamma must be"),
    (GENERATE + ["--temperature", "-1"], "temperature"),
    (GENERATE + ["--top-p", "0"], "top-p"),
    (GENERATE + ["--top-p", "1.5"], "top-p"),
    (GENERATE + ["--lenience", "0"], "lenience"),
    (GENERATE + ["--lenience", "1.5"], "lenience"),
    (GENERATE + ["--max-new-tokens", "0"], "max-new-tokens"),
    (GENERATE + ["--method", "nonsense"], "unknown method"),
    (["generate", "--prompt", "   "], "prompt is empty"),
    (["sample", "--p", "0.5,0.6", "--q", "0.5,0.5"], "sum to 1"),
    (["sample", "--p=-0.5,1.5", "--q", "0.5,0.5"], "negative"),
    (["sample", "--p", "0.5,0.5", "--q", "0.2,0.3,0.5"], "differ in length"),
    (["sample", "--p", "a,b"], "comma-separated"),
    (["sample", "--lenience", "2"], "lenience"),
    (["sample", "--implementation", "nope"], "unknown implementation 'nope'; choose one of: correct"),
    (["sample", "--implementation", "exact-match", "--lenience", "0.5"], "lenience 1"),
    (["sample", "--example", "nope"], "unknown example 'nope'; choose one of: worked, larger"),
    (["theory", "--alpha", "1.5", "--gamma", "4", "--c", "0.1"], "alpha"),
    (["theory", "--alpha", "0.5", "--gamma", "-1", "--c", "0.1"], "gamma"),
])
def test_bad_input_exit_2(args, message, capsys):
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


def test_unknown_model_offline(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli(GENERATE + ["--target", "no-such-org/no-such-model-xyz"], capsys)
    assert code == 2 and "no-such-org/no-such-model-xyz" in err


def test_missing_local_path(capsys):
    code, _, err = run_cli(GENERATE + ["--target", "./does/not/exist"], capsys)
    assert code == 2 and "does/not/exist" in err


def test_vocab_mismatch(tiny_target_dir, tiny_other_vocab_dir, capsys):
    code, _, err = run_cli(GENERATE + ["--target", str(tiny_target_dir), "--draft", str(tiny_other_vocab_dir)],
                           capsys)
    assert code == 2 and "vocabular" in err


def test_prompt_longer_than_context(tiny_target_dir, capsys):
    code, _, err = run_cli(["generate", "--prompt", "a " * 2000, "--target", str(tiny_target_dir),
                            "--method", "autoregressive"], capsys)
    assert code == 2 and "context" in err


def test_module_entry_point_has_no_traceback():
    """`python -m decoding` as a user runs it: argparse errors and value errors exit 2 cleanly."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "decoding", "sample", "--p", "0.9,0.9"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2 and "sum to 1" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "decoding", "generate", "--prompt", "x", "--gamma", "abc"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2 and "gamma" in proc.stderr and "Traceback" not in proc.stderr
