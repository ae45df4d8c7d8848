"""PPD's table (`decoding/methods/ppd/report.py`, `python -m decoding.methods.ppd report`)."""

import json

from _siblings import load_test_module

test_ppd = load_test_module("decoding/methods/ppd/test_ppd.py")
PROMPT = test_ppd.PROMPT


def test_report_table(tiny_target_dir, tmp_path, capsys):
    from decoding.methods.ppd.__main__ import main

    prompts = tmp_path / "dev.jsonl"
    prompts.write_text(json.dumps({"prompt": PROMPT}) + "\n")
    assert main(["report", "--target", str(tiny_target_dir), "--device", "cpu", "--sizes", "2,6", "--prompts",
                 str(prompts), "--max-new-tokens", "8", "--out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "| tree size |" in out and "NO" not in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert [r["tree_size"] for r in result["rows"]] == [2, 6] and all(r["greedy_equal"] for r in result["rows"])
