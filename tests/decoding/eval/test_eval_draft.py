"""eval-draft (`decoding/eval/eval_draft.py`): the greedy replay by hand and the CLI's JSON."""

from __future__ import annotations

import json

from decoding.eval.eval_draft import replay_greedy


def test_replay_greedy_by_hand():
    # gamma 4: [T T T T T] -> accept 4 + bonus (1 call, 5 tokens); then [F] -> 1 token
    assert replay_greedy([True] * 5 + [False]) == (6, 2)
    assert replay_greedy([False, False, False]) == (3, 3)
    assert replay_greedy([True, False, True, True]) == (4, 2)


def test_eval_draft_cli_json(tiny_target_dir, tiny_draft_dir, tmp_path, monkeypatch, capsys):
    from decoding.cli import main

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "say hi."}) + "\n")
    rc = main(["eval-draft", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--draft",
               str(tiny_draft_dir), "--max-new-tokens", "6", "--json", "--engine-check", "1"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("alpha", "greedy_agreement", "tokens_per_call_gamma4", "c", "draft"):
        assert key in report
    rc = main(["eval-draft", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--draft",
               "prompt-lookup", "--max-new-tokens", "6", "--json"])
    assert rc == 0
    assert "coverage" in json.loads(capsys.readouterr().out)
    # several drafts, separated by commas, are measured in one run against the same continuations
    rc = main(["eval-draft", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--draft",
               f"{tiny_draft_dir},prompt-lookup", "--max-new-tokens", "6", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["draft_spec"] for r in report["results"]] == [str(tiny_draft_dir), "prompt-lookup"]
