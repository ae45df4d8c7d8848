"""The feature draft (EAGLE): drafting from the target's own hidden states must keep speculative
decoding exact (greedy equal to autoregressive in float32, the two-token chi-square test, q in
the trace equal to the q drawn from), its cache must equal a fresh pass after any rollback, and
the distill stages that make one (features, train-features) must run and resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import torch

from decoding.cached_lm import CachedLM
from decoding.drafters import HybridDrafter
from decoding.errors import ModelLoadError
from decoding.feature_draft import FeatureDraftModel, FeatureDrafter, draft_layer_config, is_feature_draft
from decoding.output_head import OutputHead
from decoding.pair import Draft, load_draft_value
from decoding.runner import decode
from decoding.strategies import RunConfig
from decoding.strategies.speculative import ChainStep
from decoding.warp import SamplingConfig, warp_logits

import test_engine
from conftest import requires_embedded_target
from test_distill import smoke_run  # noqa: F401  (the smoke distillation pipeline, a fixture)
from test_hybrid import REPEATING

GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def feature_dir(tiny_feature_dir):
    """conftest's tiny feature draft (its head leaves out the target's 3 likeliest first tokens after
    test_engine.PROMPT)."""
    assert test_engine.PROMPT == "hello world, the cat"
    return tiny_feature_dir


@pytest.fixture(scope="module")
def feature(feature_dir, tiny_pair):
    return load_draft_value(str(feature_dir), tiny_pair[0], "float32")


def test_a_feature_draft_folder_loads_as_one(feature, feature_dir, tiny_pair):
    target, _ = tiny_pair
    assert is_feature_draft(feature_dir) and feature.feature is not None and feature.model is None
    assert feature.kind == "model" and feature.head.size == target.vocab_size - 3
    assert feature.n_params == sum(p.numel() for p in feature.feature.parameters()) > 0
    assert isinstance(feature.drafter(target), FeatureDrafter)
    assert isinstance(feature.hybrid().drafter(target), HybridDrafter)


def test_a_feature_draft_for_another_width_is_refused(tmp_path, tiny_pair, tiny_draft_dir):
    from decoding.models import load_model

    target, _ = tiny_pair
    other = load_model(str(tiny_draft_dir), device="cpu", dtype="float32")  # 32 wide, the target 64
    FeatureDraftModel(draft_layer_config(other.model.config)).save(tmp_path)
    OutputHead(torch.arange(5), torch.zeros(5, 32)).save(tmp_path, with_weight=False)
    with pytest.raises(ModelLoadError, match="32-wide hidden states; this target's are 64 wide"):
        load_draft_value(str(tmp_path), target, "float32")


def test_the_target_keeps_its_hidden_states_through_rollbacks(tiny_pair):
    target, _ = tiny_pair
    ids = target.encode_prompt(REPEATING, chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    lm.keep_features()
    plain = CachedLM(target.model, target.device, target.vocab_size)
    assert torch.allclose(lm.extend(ids[:10], keep=1), plain.extend(ids[:10], keep=1), atol=1e-5)
    lm.extend(ids[:10], [5, 6, 7])  # a draft of three tokens, all rejected
    lm.rollback(10)
    lm.extend(ids[:len(ids)])
    with torch.inference_mode():
        fresh = target.model.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state[0]
    assert torch.allclose(lm.features[: len(ids)], fresh, atol=1e-5)


def test_feature_draft_greedy_equals_autoregressive(tiny_pair, feature):
    target, _ = tiny_pair
    ids = target.encode_prompt(REPEATING, chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    for draft, gamma in ((feature, 3), (feature, "auto"), (feature.hybrid(), 3)):
        config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False,
                           **({"gamma": 4, "extra": {"gamma_schedule": "auto"}} if gamma == "auto" else {"gamma": gamma}))
        records = list(decode(target, draft, ids, config))
        assert [t.token_id for r in records for t in r.emitted] == expected
        assert sum(len(r.draft) for r in records) > 0
    sources = {ChainStep.of(r).source for r in decode(target, feature.hybrid(), ids, config) if r.draft}
    assert sources == {"lookup", "model"}, sources


def test_feature_draft_sampled_output_has_the_target_distribution(tiny_pair, feature):
    target, _ = tiny_pair
    test_engine.check_two_token_distribution(target, feature, test_engine.PROMPT, max_new_tokens=3)


def test_q_in_the_trace_is_the_draft_from_a_fresh_cache(tiny_pair, feature):
    """After every iteration (rollbacks, catch-ups), the q the trace shows for a draft's first
    token equals the q of a new drafter that reads the whole context in one pass."""
    target, _ = tiny_pair
    sampling = SamplingConfig(temperature=0.8, top_k=6)
    ids = target.encode_prompt("qzx vbn", chat=False)
    config = RunConfig(method="speculative", max_new_tokens=24, sampling=sampling, gamma=3, seed=3,
                       stop_at_eos=False)
    records = list(decode(target, feature, ids, config))
    sequence = list(ids)
    checked = 0
    for r in records:
        if r.draft:
            lm = CachedLM(target.model, target.device, target.vocab_size)
            lm.keep_features()
            lm.extend(sequence[:-1])
            fresh = feature.drafter(target)
            fresh.attach_target(lm)
            q = fresh.propose(sequence, 1, sampling, torch.Generator().manual_seed(0)).q_rows[0]
            assert abs(float(q[r.draft[0].token_id]) - r.draft[0].q) < 1e-4
            checked += 1
        sequence += [t.token_id for t in r.emitted]
    assert checked >= 5


def test_feature_draft_q_is_zero_outside_its_head(tiny_pair, feature):
    target, _ = tiny_pair
    ids = target.encode_prompt(test_engine.PROMPT, chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    lm.extend(ids[:-1])
    drafter = feature.drafter(target)
    drafter.attach_target(lm)
    assert lm.features is not None
    lm.rollback(0)
    lm.extend(ids[:-1])
    q = drafter.propose(ids, 3, SamplingConfig(temperature=1.0), torch.Generator().manual_seed(1)).q_rows
    outside = torch.ones(target.vocab_size, dtype=torch.bool)
    outside[feature.head.token_ids] = False
    assert q.shape == (3, target.vocab_size) and float(q[:, outside].abs().max()) == 0.0
    assert torch.allclose(q.sum(-1), torch.ones(3))


def test_mjsd_refuses_a_feature_draft(tiny_pair, feature):
    target, _ = tiny_pair
    config = RunConfig(method="mjsd", max_new_tokens=4, sampling=GREEDY, gamma=2)
    with pytest.raises(ValueError, match="not prompt lookup or a feature draft"):
        list(decode(target, feature, target.encode_prompt("hi", chat=False), config))


def test_smoke_features_and_training_make_a_draft_that_stays_exact(smoke_run, tmp_path):  # noqa: F811
    from distill.feature_train import train as train_features
    from distill.features import features_dir, run as run_features

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

    from decoding.feature_draft import FeatureDraftModel
    from distill.feature_train import unroll, unrolled_mask

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
                                          torch.arange(t + 1)[None], past_key_values=DynamicCache(config=cfg),
                                          use_cache=True)
                    for i in range(1, k):
                        hidden, cache = model(hidden[:, -1:], embeds[row:row + 1, t + i:t + i + 1],
                                              torch.tensor([[t + i]]), past_key_values=cache, use_cache=True)
                    assert torch.allclose(hidden[0, -1], preds[k - 1][row, s], atol=1e-5), (row, k, s)


def test_the_draft_q_matches_the_head_over_the_predicted_feature(tiny_pair, feature):
    """One draft step by hand: fc and the layer over the true pairs, the head over the last output."""
    target, _ = tiny_pair
    ids = target.encode_prompt("hello there", chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    drafter = feature.drafter(target)
    drafter.attach_target(lm)
    lm.extend(ids[:-1])
    sampling = SamplingConfig(temperature=1.0)
    q = drafter.propose(ids, 1, sampling, torch.Generator().manual_seed(0)).q_rows[0]
    with torch.inference_mode():
        f = target.model.get_decoder()(input_ids=torch.tensor([ids[:-1]])).last_hidden_state
        e = target.model.get_input_embeddings()(torch.tensor([ids[1:]]))
        pred, _ = feature.feature(f, e, torch.arange(len(ids) - 1)[None])
        logits = feature.head.logits(pred[0, -1:], target.vocab_size)[0]
    assert torch.allclose(q, warp_logits(logits, sampling), atol=1e-5)


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
    from decoding.eval_feature import feature_probs

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


def test_bench_runs_a_feature_draft_without_an_hf_peer(feature_dir, tiny_target_dir, tmp_path, capsys):
    import json

    from decoding.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "the cat sat on the cat", "category": "copy"}) + "\n")
    argv = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--draft", f"{feature_dir},hybrid:{feature_dir}", "--gamma", "2", "--max-new-tokens", "6",
            "--repeats", "1", "--warmup", "0", "--no-memory", "--no-quality", "--out", str(tmp_path / "b"), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    label = feature_dir.name
    # HF's assisted generation cannot draft from the target's states: no HF assisted rows for either
    assert set(result["methods"]) == {"autoregressive", f"speculative-{label}-g2",
                                      f"speculative-hybrid-{label}-g2", "hf-generate"}
    assert result["models"]["drafts"][label]["params"] > 0
    assert all(v == "1/1" for v in result["greedy_equal_to_autoregressive"].values())


def assert_greedy_equals_autoregressive(target, draft) -> None:
    """Greedy speculative decoding with `draft` writes autoregressive decoding's 12 tokens."""
    config = RunConfig(method="speculative", gamma=3, max_new_tokens=12, sampling=GREEDY, stop_at_eos=False)
    ids = target.encode_prompt("say hi.", chat=True)
    spec = [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]
    auto = [t.token_id for r in decode(target, None, ids, dataclasses.replace(config, method="autoregressive"))
            for t in r.emitted]
    assert spec == auto


def test_the_feature_stages_refuse_bad_input_with_exit_2(tmp_path, capsys):
    from distill.__main__ import main

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


# ---- the shipped feature draft ------------------------------------------------------------------


@requires_embedded_target
def test_shipped_feature_draft_is_exact_and_the_app_offers_it(embedded_target):
    """`--draft feature` loads the shipped folder for the offline target (head rows from the
    target's head, eos inside); greedy output equals autoregressive in float32, with tokens
    accepted; the app lists its preset and says what it drafts from."""
    from app.handlers import load_models
    from app.presets import presets
    from decoding.paths import SHIPPED_FEATURE_DRAFT

    assert (SHIPPED_FEATURE_DRAFT / "README.md").is_file()
    assert sum(f.stat().st_size for f in SHIPPED_FEATURE_DRAFT.iterdir()) < 10_000_000
    target = embedded_target
    draft = load_draft_value("feature", target, "float32")
    assert draft.feature is not None and draft.head.size == 8192
    assert set(target.eos_token_ids(True)) <= set(draft.head.token_ids.tolist())
    assert torch.equal(draft.head.weight, target.model.get_output_embeddings().weight[draft.head.token_ids])
    ids = target.encode_prompt("Name three colors of the rainbow.", chat=True)
    config = RunConfig(method="speculative", gamma=4, max_new_tokens=24, sampling=GREEDY, chat=True)
    spec = list(decode(target, draft, ids, config))
    auto = list(decode(target, None, ids, dataclasses.replace(config, method="autoregressive")))
    assert [t.token_id for r in spec for t in r.emitted] == [t.token_id for r in auto for t in r.emitted]
    assert len(spec) < len(auto)  # some draft tokens were accepted
    label = next(p.label for p in presets() if p.key == "default-feature")
    message = load_models(label, "", "", "float32", progress=lambda *a, **k: None)
    assert "drafting from the target's own hidden states over the target's 8,192 most frequent tokens" in message
    label = next(p.label for p in presets() if p.key == "default-hybrid-feature")
    message = load_models(label, "", "", "float32", progress=lambda *a, **k: None)
    assert "hybrid" in message and "feature-draft-smollm2-135m" in message, message


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


def test_unroll_folds_several_layers_through_a_fuse_and_regresses_on_the_final_state():
    """experiments/multilayer_features.py's fused arm: a draft with `fuse_in` reads wider input features;
    a fuse that starts as "take the final state" gives exactly the plain draft's predictions, and the
    regression target is the final state (the first block), not the whole fused width."""
    import importlib.util

    from transformers import LlamaConfig

    from decoding.feature_draft import FeatureDraftModel
    from distill.feature_train import collate, losses, unroll

    spec = importlib.util.spec_from_file_location(
        "multilayer_features", Path(__file__).resolve().parents[1] / "experiments" / "multilayer_features.py")
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


def test_the_app_loads_a_feature_draft_once_for_every_run(feature_dir, tiny_pair):
    """load_draft_value(cached=True), the app's path: every run of a class shares one feature draft
    (one copy of its layer and head rows; one model whose passes the cross-run batcher can share)."""
    from decoding.pair import clear_draft_cache

    target, _ = tiny_pair
    first = load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True)
    again = load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True)
    assert again is first and first.feature is not None
    assert load_draft_value(str(feature_dir), target, "float32", cached=True).feature is not None
    assert load_draft_value(f"hybrid:{feature_dir}", target, "float32").feature is not first.feature  # uncached
    clear_draft_cache()
    assert load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True) is not first
