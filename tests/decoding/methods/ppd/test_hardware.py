"""PPD's hardware-aware tree size (`decoding/methods/ppd/hardware.py`, `tuning.py`, `python -m
decoding.methods.ppd tune`)."""

import dataclasses
import json

import pytest
import torch

from decoding.methods.ppd.hardware import acceptance_table, choose_tree_size, measure_latency
from decoding.methods.ppd.prompts import untrained_prompt_tokens
from decoding.methods.ppd.tree import dynamic_trees
from decoding.methods.ppd.tuning import cached_choice, save_tuning

from _siblings import load_test_module

test_ppd = load_test_module("decoding/methods/ppd/test_ppd.py")
PROMPT, run, tiny = test_ppd.PROMPT, test_ppd.run, test_ppd.tiny


def test_hardware_aware_tree_size(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    best, curve = choose_tree_size({2: 1.0, 8: 1.2, 32: 3.0}, {2: 1.3, 8: 1.9, 32: 2.5})
    assert best == 8 and curve[2] == pytest.approx(1.3) and curve[8] == pytest.approx(1.9 / 1.2)
    prompts = untrained_prompt_tokens(tiny)
    latency = measure_latency(tiny, prompts, [1, 6], context=16, reps=1)
    assert set(latency) == {1, 6} and all(v > 0 for v in latency.values())
    ids = tiny.encode_prompt(PROMPT, False)
    assert run(tiny, "ppd", ids, n=2)[0].extra["ppd"]["tree_size_chosen_by"].startswith("default")
    save_tuning(tiny, {"tree_size": 6, "embeddings": prompts.source, "acceptance": [[0.5] * 10] * 3})
    assert cached_choice(tiny) == 6
    # the latency curve belongs to the weights' dtype too: a bfloat16 copy is not tuned
    assert cached_choice(dataclasses.replace(tiny, dtype=torch.bfloat16)) is None
    r = run(tiny, "ppd", ids, n=2)[0]
    assert r.extra["ppd"]["tree_size"] == 6 and r.extra["ppd"]["tree_size_chosen_by"].startswith("hardware")
    # an explicit tree size also builds its trees from the tuned acceptance table
    flat = [[0.5] * 10] * 3
    explicit = run(tiny, "ppd", ids, n=2, tree_size=8)[0].extra["ppd"]
    assert explicit["tree_size_chosen_by"] == "flag"
    assert explicit["tree"] == dynamic_trees(8, 3, 1, flat).trees[explicit["state"]].as_dict()
    assert dynamic_trees(8, 3, 1, flat).trees[3].as_dict() != dynamic_trees(8, 3, 1).trees[3].as_dict()
    table = acceptance_table([run(tiny, "ppd", ids, n=20, tree_size=8)], m=3)
    assert len(table) == 3 and all(0.0 <= v <= 1.0 for row in table for v in row)


def test_latency_is_timed_round_robin(tiny, monkeypatch):
    """Every round times each size once, starting one size later than the round before, so noise
    on a shared machine spreads over all sizes (after one untimed warm-up pass per size)."""
    import decoding.methods.ppd.hardware as hardware

    seen = []
    real = hardware.lm_tree_forward

    def spy(lm, pre, tree_ids, buffers, *rest, **kw):
        seen.append(buffers.size - 1)  # tree size n = rows after the root
        return real(lm, pre, tree_ids, buffers, *rest, **kw)

    monkeypatch.setattr(hardware, "lm_tree_forward", spy)
    latency = measure_latency(tiny, untrained_prompt_tokens(tiny), [1, 3, 6], context=8, reps=3)
    assert set(latency) == {1, 3, 6}
    assert seen == [1, 3, 6] + [1, 3, 6] + [3, 6, 1] + [6, 1, 3]


def test_tune_cli(tiny_target_dir, tmp_path, monkeypatch, capsys):
    from decoding.methods.ppd.__main__ import main

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    prompts = tmp_path / "dev.jsonl"
    prompts.write_text(json.dumps({"prompt": PROMPT}) + "\n")
    assert main(["tune", "--target", str(tiny_target_dir), "--device", "cpu", "--sizes", "1,4", "--prompts",
                 str(prompts), "--limit", "1", "--max-new-tokens", "6", "--context", "8", "--reps", "1",
                 "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["tree_size"] in (1, 4) and (tmp_path / "ppd" / "tuning.json").exists()
    from decoding.lm.models import load_model
    from decoding.methods.ppd.tuning import tuning_curves

    curves = tuning_curves(load_model(str(tiny_target_dir), device="cpu"))  # the tune CLI's default dtype
    assert curves["n"] == [1, 4] and curves["chosen"] == entry["tree_size"] and len(curves["latency_ms"]) == 2
    assert all(t >= 1.0 for t in curves["model_tokens_per_step"])
