"""The draft distillation pipeline (smoke configuration on tiny models), eval-draft, and the
shipped distilled draft for the embedded SmolLM2 target."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from decoding.drafters.model import ModelDrafter
from decoding.eval.eval_draft import evaluate
from decoding.lm.models import check_same_vocabulary, load_model
from decoding.methods.base import RunConfig
from decoding.paths import SHIPPED_DRAFT
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.runner import generate
from training.data import generate as generate_data
from training.export import MAX_BYTES, export, write_card
from training.train import train

from conftest import SMOKE_PROMPTS as PROMPTS, requires_embedded_target


def test_smoke_data_has_soft_labels(smoke_run):
    cfg, target, _, n_shards, _, _ = smoke_run
    shards = sorted(Path(cfg.data_dir).glob("shard-*.pt"))
    assert len(shards) == n_shards == 3  # 5 prompts x 2 rounds in batches of 4
    shard = torch.load(shards[0], weights_only=True)
    for toks, ids, probs, rnd in zip(shard["tokens"], shard["topk_ids"], shard["topk_p"], shard["round"]):
        assert ids.shape == probs.shape == (len(toks), cfg.top_k)
        assert torch.all(probs[:, :-1] >= probs[:, 1:])  # sorted top-k
        assert float(probs.float().sum(1).max()) <= 1.0 + 1e-2
        if rnd < cfg.greedy_rounds:  # greedy rows emit the target's argmax
            assert torch.equal(toks.long(), ids[:, 0].long())
        else:  # sampled rows emit tokens the target gives probability to
            assert len(toks) > 0


def test_smoke_run_writes_only_in_its_own_folder(smoke_run):
    """Every folder a stage writes is under the run's temporary root: a stage writing into the
    repository (the on-policy data once did) is read by the other tests of a later run or of another
    worker, and their counts then depend on what ran before."""
    cfg = smoke_run[0]
    root = Path(cfg.data_dir).parent
    folders = {f.name: Path(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name.endswith("_dir")}
    assert set(folders) >= {"data_dir", "onpolicy_dir", "ckpt_dir", "out_dir"}
    assert all(path.is_absolute() and root in path.parents for path in folders.values()), folders


def test_smoke_data_resumes(smoke_run):
    cfg, target, _, n_shards, _, _ = smoke_run
    logs = []
    assert generate_data(cfg, target=target, log=logs.append) == n_shards
    assert "0 to do" in logs[0], logs


def test_smoke_training_checkpoints_and_resumes(smoke_run):
    cfg, target, _, _, state, _ = smoke_run
    assert state["finished"] and state["step"] == state["total_steps"]
    assert state["history"] and all(h["loss"] == h["loss"] for h in state["history"])  # not NaN
    logs = []
    again = train(cfg, target=target, log=logs.append)  # finished: nothing to do
    assert again["step"] == state["step"] and "finished" in logs[0]


def test_smoke_export_loads_and_drafts(smoke_run):
    cfg, target, out, _, _, _ = smoke_run
    draft = load_model(str(out), device="cpu", dtype="float32")
    check_same_vocabulary(target, draft)
    assert draft.vocab_size == target.vocab_size
    assert sum(f.stat().st_size for f in out.iterdir()) < MAX_BYTES
    config = RunConfig(method="speculative", gamma=3, max_new_tokens=12, sampling=SamplingConfig(0.0),
                       chat=True, stop_at_eos=False)
    _, spec = generate(target, draft, "say hi.", config)
    _, auto = generate(target, None, "say hi.", dataclasses.replace(config, method="autoregressive"))
    assert spec.token_ids == auto.token_ids


def test_smoke_eval_draft_and_card(smoke_run, tmp_path, monkeypatch):
    cfg, target, out, _, _, _ = smoke_run
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    draft = load_model(str(out), device="cpu", dtype="float32")
    report = evaluate(target, [draft, "prompt-lookup"], PROMPTS[:2], max_new_tokens=10,
                      engine_check=2, timing_repeats=5)
    model_r, lookup_r = report["results"]
    for r in (model_r, lookup_r):
        assert 0.0 <= r["alpha"] <= 1.0 and 0.0 <= r["greedy_agreement"] <= 1.0
        assert 1.0 <= r["tokens_per_call_gamma4"] <= 5.0
        assert r["c"] > 0
        e = r["engine_check"]
        # the replay of greedy speculative decoding matches the engine's real run
        assert e["outputs_equal_greedy_autoregressive"] == 2
        assert e["tokens_per_call_engine"] == pytest.approx(e["tokens_per_call_replay"])
    assert 0.0 <= lookup_r["coverage"] <= 1.0
    # cached target side: a second evaluation gives the same figures
    again = evaluate(target, [draft], PROMPTS[:2], max_new_tokens=10, engine_check=0, timing_repeats=5)
    assert again["results"][0]["alpha"] == pytest.approx(model_r["alpha"])
    write_card(out, report, "python -m decoding eval-draft ...")
    card = (out / "README.md").read_text()
    assert "## Architecture" in card and "| prompt-lookup |" in card


# ---- the shipped draft ------------------------------------------------------------------------


def _shipped():
    path = SHIPPED_DRAFT
    if not (path / "config.json").is_file():
        pytest.fail(f"the distilled draft is not shipped in {path}")
    return path


def test_shipped_draft_loads_and_fits_budget():
    path = _shipped()
    draft = load_model(str(path), device="cpu", dtype="float32")
    assert draft.vocab_size == 49152
    assert draft.tokenizer.get_vocab().get("<|im_end|>") is not None
    assert sum(f.stat().st_size for f in path.iterdir() if f.is_file()) <= MAX_BYTES
    assert (path / "README.md").is_file()


@requires_embedded_target
def test_shipped_draft_shares_vocabulary_and_greedy_equals_autoregressive(embedded_target):
    target = embedded_target
    draft = load_model(str(_shipped()), device="cpu", dtype="float32")
    check_same_vocabulary(target, draft)
    assert draft.vocab_size == target.vocab_size
    config = RunConfig(method="speculative", gamma=4, max_new_tokens=24, sampling=SamplingConfig(0.0), chat=True)
    _, spec = generate(target, draft, "Name three colors of the rainbow.", config)
    _, auto = generate(target, None, "Name three colors of the rainbow.",
                       dataclasses.replace(config, method="autoregressive"))
    assert spec.token_ids == auto.token_ids
    assert spec.target_calls < auto.target_calls  # the draft gets some tokens accepted


@requires_embedded_target
def test_shipped_draft_drafts_with_its_8192_token_head(embedded_target):
    """The shipped head.safetensors: 8,192 token ids (end-of-sequence among them) whose rows come from
    the draft's own tied head; the app's load message says the draft proposes only those tokens."""
    from app.explainer.handlers import load_models
    from app.presets import presets
    from decoding.run.pair import load_draft_value

    draft = load_draft_value("distilled", embedded_target, "float32")
    assert draft.head is not None and draft.head.size == 8192
    assert set(embedded_target.eos_token_ids(True)) <= set(draft.head.token_ids.tolist())
    full = draft.model.model.get_output_embeddings().weight
    assert torch.equal(draft.head.weight, full[draft.head.token_ids])
    label = next(p.label for p in presets() if p.key == "default-hybrid")
    message = load_models(label, "", "", "float32", progress=lambda *a, **k: None)
    assert "drafting only the target's 8,192 most frequent tokens" in message


def test_shipped_draft_q_is_the_distribution_sampled_from():
    draft = load_model(str(_shipped()), device="cpu", dtype="float32")
    ids = draft.encode_prompt("Write a haiku about rain.", chat=True)
    sampling = SamplingConfig(temperature=0.8, top_k=50, top_p=0.9)
    drafter = ModelDrafter(draft.model, draft.device, draft.vocab_size, draft.name)
    gen = torch.Generator().manual_seed(0)
    proposal = drafter.propose(ids, 3, sampling, gen)
    with torch.inference_mode():
        logits = draft.model(input_ids=torch.tensor([ids + proposal.tokens[:2]])).logits[0, len(ids) - 1 :].float()
    expected = warp_logits(logits, sampling)
    assert torch.allclose(proposal.q_rows, expected, atol=1e-5)
    for i, x in enumerate(proposal.tokens):
        assert proposal.q_rows[i, x] > 0  # each token has mass under the q it was drawn from


def test_smoke_onpolicy_scoring_matches_target(smoke_run):
    from training.data import generate_onpolicy, sample_batch, score_batch

    cfg, target, _, _, _, _ = smoke_run
    # teacher-forced scoring of the target's own greedy continuation gives back its argmaxes
    ids = [target.encode_prompt(p, True) for p in PROMPTS[:3]]
    rows = sample_batch(target.model, ids, [True] * 3, 8, 4, target.eos_token_ids(True), 0,
                        torch.Generator().manual_seed(0), target.device)
    labels = score_batch(target.model, ids, [r[0].tolist() for r in rows], 4, 0, target.device)
    for r, (top_ids, top_p) in zip(rows, labels):
        assert torch.equal(top_ids[:, 0].long(), r[0].long())
        assert torch.allclose(top_p.float(), r[2].float(), atol=2e-3)
    n = generate_onpolicy(cfg, str(Path(cfg.ckpt_dir) / "last.pt"), target=target, log=lambda m: None)
    assert n == len(list(Path(cfg.onpolicy_dir).glob("shard-*.pt"))) > 0
    from training.train import list_shards

    assert any(s.startswith("onpolicy_dir/") for s in list_shards(cfg))


def test_smoke_restricted_head_trains_exports_and_stays_exact(smoke_run, tmp_path):
    """A draft with an untied head over its most frequent tokens only: warm-started from the smoke
    draft, trained, exported with head.safetensors, loaded with that head, and exact."""
    from decoding.run.pair import load_draft_value

    cfg, target, out, _, _, _ = smoke_run
    head_cfg = dataclasses.replace(cfg, head_tokens=12, ckpt_dir=str(tmp_path / "ckpt"), out_dir=str(tmp_path / "draft"))
    logs = []
    state = train(head_cfg, target=target, warm_start=str(out), log=logs.append)
    assert state["finished"] and len(state["head_tokens"]) == 12 and state["head"].shape[0] == 12
    assert any("head over 12 tokens" in line for line in logs)
    exported = export(head_cfg, target=target, log=logs.append)
    assert (exported / "head.safetensors").is_file()
    draft = load_draft_value(str(exported), target, "float32")
    assert draft.head is not None and draft.head.token_ids.tolist() == state["head_tokens"]
    proposal = draft.drafter(target).propose(target.encode_prompt("say hi.", True), 3, SamplingConfig(0.7),
                                             torch.Generator().manual_seed(0))
    outside = [t for t in range(target.vocab_size) if t not in set(state["head_tokens"])]
    assert float(proposal.q_rows[:, outside].sum()) == 0.0  # q has explicit zeros outside the head
    config = RunConfig(method="speculative", gamma=3, max_new_tokens=12, sampling=SamplingConfig(0.0),
                       chat=True, stop_at_eos=False)
    _, spec = generate(target, draft, "say hi.", config)
    _, auto = generate(target, None, "say hi.", dataclasses.replace(config, method="autoregressive"))
    assert spec.token_ids == auto.token_ids


def test_smoke_trim_head_keeps_the_most_frequent_tokens_and_stays_exact(smoke_run, tmp_path):
    """`python -m training trim-head`: the head holds the draft's own rows for the K most frequent
    generated tokens of the training shards (counted by value) plus end-of-sequence, the copy of the
    draft loads with it, q is zero outside it, and greedy decoding still equals autoregressive."""
    from collections import Counter

    from decoding.run.pair import load_draft_value
    from training.train import list_shards, load_examples
    from training.trim_head import main as trim_main, trim

    cfg, target, out, _, _, _ = smoke_run
    train_ex, _ = load_examples(cfg, list_shards(cfg), len(cfg.prompt_texts()))
    counts = Counter(int(t) for e in train_ex for t in e[1].tolist())
    eos = target.eos_token_ids(cfg.chat)
    k = len(eos) + 5
    figures = trim(cfg, out, k, tmp_path / "trimmed", target=target, log=lambda m: None)
    draft = load_draft_value(str(tmp_path / "trimmed"), target, "float32")
    kept = draft.head.token_ids.tolist()
    assert len(kept) == figures["head_tokens"] == k and set(eos) <= set(kept)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    assert len(ranked) > k  # the shards have more distinct tokens than the head keeps
    top = [t for t, _ in ranked if t not in set(eos)][:k - len(set(eos))]
    assert set(top) <= set(kept)  # the most frequent ones, by value
    full = draft.model.model.get_output_embeddings().weight
    assert torch.equal(draft.head.weight, full[torch.tensor(kept)])  # the draft's own rows
    assert 0.0 < figures["holdout_token_share"] <= 1.0 and 0.0 < figures["holdout_soft_label_mass"] <= 1.0
    record = json.loads((tmp_path / "trimmed" / "training.json").read_text())
    assert record["head_tokens"] == k and record["trimmed_head"]["head_tokens"] == k
    assert not (out / "head.safetensors").exists()  # the source draft is untouched

    proposal = draft.drafter(target).propose(target.encode_prompt("say hi.", True), 3, SamplingConfig(0.7),
                                             torch.Generator().manual_seed(0))
    outside = [t for t in range(target.vocab_size) if t not in set(kept)]
    assert float(proposal.q_rows[:, outside].sum()) == 0.0
    config = RunConfig(method="speculative", gamma=3, max_new_tokens=12, sampling=SamplingConfig(0.0),
                       chat=True, stop_at_eos=False)
    _, spec = generate(target, draft, "count to five:", config)
    _, auto = generate(target, None, "count to five:", dataclasses.replace(config, method="autoregressive"))
    assert spec.token_ids == auto.token_ids

    assert trim_main(["--draft", str(out), "--tokens", "0", "--out", str(tmp_path / "x")]) == 2
    assert trim_main(["--draft", str(tmp_path / "nothing"), "--tokens", "4", "--out", str(tmp_path / "x")]) == 2
    with pytest.raises(ValueError, match="not fewer than the draft's vocabulary"):
        trim(cfg, out, target.vocab_size, tmp_path / "y", target=target, log=lambda m: None)


def test_distill_stages_refuse_a_bad_config_with_exit_2(tmp_path, capsys):
    """Every stage reads --config through get_config: a missing file or unknown fields is a usage
    error with one line, not a traceback."""
    from training.__main__ import main as distill_main

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"bogus": 1}))
    for argv in (["data", "--config", str(tmp_path / "missing.json")], ["train", "--config", str(bad)],
                 ["trim-head", "--config", "nosuch", "--draft", str(tmp_path), "--tokens", "4", "--out", str(tmp_path / "o")]):
        if argv[0] == "trim-head":
            (tmp_path / "config.json").write_text("{}")  # passes the draft-folder check, fails on --config
        assert distill_main(argv) == 2
        assert "error: --config" in capsys.readouterr().err
