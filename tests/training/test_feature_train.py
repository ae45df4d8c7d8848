"""The feature draft's trainer (`training/features.py`, `training/feature_train.py`): the smoke stages
make a draft that stays exact, unrolled training steps see what a draft sees at inference, bad input
exits 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

GREEDY = SamplingConfig(temperature=0.0)


def test_smoke_features_and_training_make_a_draft_that_stays_exact(smoke_run, tmp_path):
    from training.feature_train import train as train_features
    from training.features import features_dir, run as run_features

    cfg, target, _, _, _, _ = smoke_run
    cfg = dataclasses.replace(cfg, bf16_autocast=False)
    logs = []
    out = run_features(cfg, {0, 1}, target=target, log=logs.append)
    parts = sorted(out.glob("part-*.pt"))
    assert parts and out == features_dir(cfg)
    record = torch.load(parts[0], weights_only=True)[0]
    cont = record["conts"][0]
    full = torch.cat([record["prompt"], cont["tokens"]])
    with torch.inference_mode():
        fresh = target.model.get_decoder()(input_ids=full[None]).last_hidden_state[0]
    both = torch.cat([record["prompt_features"], cont["features"]]).float()
    assert torch.allclose(both, fresh, atol=2e-2)  # bfloat16 storage of the same states
    run_features(cfg, {0, 1}, target=target, log=logs.append)  # finished parts are skipped
    assert sum("part" in line for line in logs) == len(parts)

    state = train_features(cfg, tmp_path / "fd", epochs=2, batch_tokens=64, lr=1e-3, head_tokens=20,
                           target=target, log=logs.append)
    assert state["step"] == state["total"] and state["history"]
    assert all(h["reg"] == h["reg"] for h in state["history"])  # not NaN
    again = train_features(cfg, tmp_path / "fd", epochs=2, batch_tokens=64, lr=1e-3, head_tokens=20,
                           target=target, log=logs.append)  # resumes from its finished checkpoint
    assert again["step"] == state["step"]
    draft = load_draft_value(str(tmp_path / "fd"), target, "float32")
    assert draft.feature is not None and draft.head.size <= 20
    stopped = train_features(cfg, tmp_path / "fd-stopped", epochs=2, batch_tokens=64, lr=1e-3, head_tokens=20,
                             target=target, log=logs.append, max_seconds=1e-9)  # stops after its first step
    made = json.loads((tmp_path / "fd-stopped" / "training.json").read_text())
    assert stopped["step"] == made["steps"] == 1 < made["total_steps"] == stopped["total"] and not made["finished"]
    assert load_draft_value(str(tmp_path / "fd-stopped"), target, "float32").feature is not None
    # EAGLE-3's training-time test, going on from the draft just made: its head tokens are kept
    unrolled = train_features(cfg, tmp_path / "fd3", epochs=1, batch_tokens=64, lr=1e-3, head_tokens=20,
                              target=target, log=logs.append, steps=3, init=tmp_path / "fd")
    assert unrolled["step"] == unrolled["total"]
    baseline = unrolled["history"][0]  # the --init draft, read before training
    assert baseline["step"] == 0 and "top1_agreement_step3" in baseline
    last = unrolled["history"][-1]
    assert 0 <= last["top1_agreement_step3"] <= 1 and last["reg"] == last["reg"]
    made = json.loads((tmp_path / "fd3" / "training.json").read_text())
    assert made["unroll_steps"] == 3 and made["init"] == "fd" and made["finished"]
    assert made["init_training"]["steps"] == state["step"] and "config" not in made["init_training"]
    assert load_draft_value(str(tmp_path / "fd3"), target, "float32").head.token_ids.tolist() == \
        draft.head.token_ids.tolist()
    assert_greedy_equals_autoregressive(target, draft)


def test_unrolled_training_steps_see_what_a_draft_sees_at_inference():
    """EAGLE-3's training-time test: unrolled step k at position s must equal the draft's k-th token
    at inference, fed the true pairs up to s - k + 1 in one pass and then its own predictions."""
    from transformers import DynamicCache, LlamaConfig

    from decoding.drafters.feature import FeatureDraftModel
    from training.feature_train import unroll, unrolled_mask

    # step 2 on 3 positions: query s sees the step-1 keys j <= s - 1 and its own step-2 key
    assert unrolled_mask(3, 2, 1)[0, 0].int().tolist() == [[0, 0, 0, 1, 0, 0], [1, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 1]]
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                      num_hidden_layers=1, vocab_size=1, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = FeatureDraftModel(cfg).eval()
    feats, embeds = torch.randn(2, 9, 32), torch.randn(2, 9, 32)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # a right-padded row
    with torch.no_grad():
        preds = unroll(model, feats, embeds, mask, 3)
        for row, length in ((0, 9), (1, 6)):
            for k in (1, 2, 3):
                for s in range(k - 1, length):
                    t = s - k + 1  # the last true pair
                    hidden, cache = model(feats[row:row + 1, :t + 1], embeds[row:row + 1, :t + 1],
                                          torch.arange(t + 1)[None], cache=DynamicCache(config=cfg),
                                          use_cache=True)
                    for i in range(1, k):
                        hidden, cache = model(hidden[:, -1:], embeds[row:row + 1, t + i:t + i + 1],
                                              torch.tensor([[t + i]]), cache=cache, use_cache=True)
                    assert torch.allclose(hidden[0, -1], preds[k - 1][row, s], atol=1e-5), (row, k, s)


def assert_greedy_equals_autoregressive(target, draft) -> None:
    """Greedy speculative decoding with `draft` writes autoregressive decoding's 12 tokens."""
    config = RunConfig(method="speculative", gamma=3, max_new_tokens=12, sampling=GREEDY, stop_at_eos=False)
    ids = target.encode_prompt("say hi.", chat=True)
    spec = [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]
    auto = [t.token_id for r in decode(target, None, ids, dataclasses.replace(config, method="autoregressive"))
            for t in r.emitted]
    assert spec == auto


def test_the_feature_stages_refuse_bad_input_with_exit_2(tmp_path, capsys):
    from training.__main__ import main

    config = tmp_path / "c.json"
    config.write_text(json.dumps({"data_dir": str(tmp_path / "none"), "ckpt_dir": str(tmp_path / "ck")}))
    assert main(["features", "--config", str(config)]) == 2
    assert "no data shards" in capsys.readouterr().err
    assert main(["train-features", "--config", str(config)]) == 2
    assert "no target features" in capsys.readouterr().err
    assert main(["train-features", "--config", str(config), "--init", str(tmp_path)]) == 2
    assert "is not a feature draft's folder" in capsys.readouterr().err
    for stage in ("features", "train-features"):
        assert main([stage, "--config", str(config), "--device", "tpu"]) == 2
        assert "error: --device: unknown device 'tpu'" in capsys.readouterr().err
    for argv in (["features", "--worker", "3/2"], ["features", "--rounds", "a"], ["train-features", "--layers", "0"],
                 ["train-features", "--cls-weight", "-1"], ["train-features", "--epochs", "0"],
                 ["train-features", "--unroll-steps", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(argv + ["--config", str(config)])
        assert exc.value.code == 2, argv
        assert "error:" in capsys.readouterr().err


def test_unroll_folds_several_layers_through_a_fuse_and_regresses_on_the_final_state():
    """experiments/multilayer_features.py's fused arm: a draft with `fuse_in` reads wider input features;
    a fuse that starts as "take the final state" gives exactly the plain draft's predictions, and the
    regression target is the final state (the first block), not the whole fused width."""
    import importlib.util

    from transformers import LlamaConfig

    from decoding.drafters.feature import FeatureDraftModel
    from training.feature_train import collate, losses, unroll

    spec = importlib.util.spec_from_file_location(
        "multilayer_features", Path(__file__).resolve().parents[2] / "experiments" / "multilayer_features.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                      num_hidden_layers=1, vocab_size=1, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    draft = FeatureDraftModel(cfg).eval()
    fused = script.make_fused(draft, 3, 32).eval()
    wide, embeds = torch.randn(2, 7, 96), torch.randn(2, 7, 32)
    mask = torch.ones(2, 7, dtype=torch.long)
    with torch.no_grad():
        plain = unroll(draft, wide[..., :32], embeds, mask, 3)
        folded = unroll(fused, wide, embeds, mask, 3)
        for a, b in zip(plain, folded):
            assert torch.allclose(a, b, atol=1e-6)
        fused.fuse.weight[:, 32:].normal_()  # now the other layers count
        assert not torch.allclose(unroll(fused, wide, embeds, mask, 1)[0], plain[0])
    # one sequence of 6 tokens, prompt of 2, states 96 wide; labels over the 4 answer tokens
    tokens = torch.tensor([1, 2, 3, 4, 5, 6])
    seq = (tokens, torch.randn(6, 96), 2, torch.tensor([[0, 1]] * 4), torch.tensor([[0.6, 0.4]] * 4))
    table = torch.arange(8)
    batch = collate([seq], [0], table)
    head_w = torch.randn(8, 32)
    embedding = torch.nn.Embedding(8, 32)
    with torch.no_grad():
        (reg, cls, *_), = losses(fused, embedding, head_w, batch, noise=0.0, steps=1)
        pred = unroll(fused, batch[0], embedding(batch[1]), batch[3], 1)[0]
    expected = torch.nn.functional.smooth_l1_loss(pred[0, :5], seq[1][1:, :32])
    assert torch.allclose(reg, expected) and torch.isfinite(cls)
