"""eval-draft's figures for a feature draft (`decoding/eval/eval_feature.py`): teacher-forced alpha and
greedy agreement from the target's features, tokens per call from the engine."""

from __future__ import annotations

import torch

from decoding.lm.cached_lm import CachedLM
from decoding.rules.warp import SamplingConfig

from _siblings import load_test_module

test_feature = load_test_module("decoding/drafters/test_feature.py")
feature_dir, feature = test_feature.feature_dir, test_feature.feature


def test_eval_draft_measures_a_feature_draft(feature_dir, tiny_target_dir, tmp_path, monkeypatch, capsys):
    """alpha and greedy agreement teacher-forced from the target's features, tokens per call from
    the engine's own runs, c from timed steps; beside a model draft in one run."""
    import json

    from decoding.cli import main

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("say hi.", "the cat sat on the mat")))
    rc = main(["eval-draft", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--draft",
               f"{feature_dir},prompt-lookup", "--max-new-tokens", "8", "--dtype", "float32", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    feature_row = report["results"][0]
    assert 0.0 <= feature_row["alpha"] <= 1.0 and 0.0 <= feature_row["greedy_agreement"] <= 1.0
    assert 1.0 <= feature_row["tokens_per_call_gamma4"] <= 5.0 and feature_row["c"] > 0
    assert feature_row["engine_check"]["outputs_equal_greedy_autoregressive"] == 2  # float32: exact
    assert feature_row["head_tokens"] == report["results"][0]["head_tokens"] > 0


def test_feature_probs_agree_with_the_drafter(tiny_pair, feature):
    """eval-draft's teacher-forced q of a continuation token is the engine drafter's first q there."""
    from decoding.eval.eval_feature import feature_probs

    target, _ = tiny_pair
    prompt = target.encode_prompt("hello there", chat=False)
    cont = target.encode_prompt(" friend", chat=False)
    q = feature_probs(target, feature, prompt, cont, target.vocab_size)
    assert q.shape == (len(cont), target.vocab_size)
    for j in range(len(cont)):
        sequence = prompt + cont[:j]
        lm = CachedLM(target.model, target.device, target.vocab_size)
        drafter = feature.drafter(target)
        drafter.attach_target(lm)
        lm.extend(sequence[:-1])
        first = drafter.propose(sequence, 1, SamplingConfig(temperature=1.0), torch.Generator()).q_rows[0]
        assert torch.allclose(first, q[j], atol=1e-4)  # float32 rounding: one pass against several


def test_eval_draft_without_engine_runs_has_no_tokens_per_call_for_a_feature_draft(feature_dir, tiny_target_dir,
                                                                                     tmp_path, monkeypatch, capsys):
    """Its tokens per call come from the engine only: with --engine-check 0 the table says n/a, not 0."""
    import json

    from decoding.cli import main

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "say hi."}) + "\n")
    argv = ["eval-draft", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--draft", str(feature_dir),
            "--max-new-tokens", "6", "--dtype", "float32", "--engine-check", "0"]
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens_per_call_gamma4"] is None
    assert main(argv) == 0
    assert "| n/a |" in capsys.readouterr().out
