"""PPD (Chen et al.): greedy output identical to greedy autoregressive decoding, the tree forward pass
and KV compaction against fresh forward passes, typical acceptance, the trace, the hardware-aware
tree size and a training smoke test, on the tiny random models (plus one short run on the real
target)."""

import dataclasses
import json
import math

import pytest
import torch
from transformers import DynamicCache

from decoding.lm.cached_lm import CachedLM
from decoding.methods.ppd.engine import (
    compact_cache, prompt_predictions, tree_forward, typical_threshold, verify_greedy, verify_typical
)
from decoding.methods.ppd.hardware import acceptance_table, choose_tree_size, measure_latency
from decoding.methods.ppd.tuning import cached_choice, save_tuning
from decoding.methods.ppd.prompts import load_prompt_tokens, untrained_prompt_tokens
from training.ppd_train import cached_insertion_step, decayed_kl, insertion_forward
from decoding.methods.ppd.tree import dynamic_trees, make_tree, tree_buffers
from decoding.methods.registry import METHODS
from decoding.methods.base import RunConfig
from decoding.trace.record import IterationRecord
from decoding.rules.warp import SamplingConfig

PROMPT = "the quick brown fox"


def run(target, method, prompt_ids, n=40, temperature=0.0, seed=0, **extra):
    config = RunConfig(method=method, max_new_tokens=n, sampling=SamplingConfig(temperature), seed=seed,
                       stop_at_eos=False, extra=extra)
    return list(METHODS[method](target, None, prompt_ids, config))


def tokens(records):
    return [t.token_id for r in records for t in r.emitted]


@pytest.fixture(scope="module")
def tiny(tiny_pair):
    return tiny_pair[0]


@pytest.mark.parametrize("size, m, ept", [(1, 3, 1), (4, 1, 1), (12, 3, 1), (24, 3, 2), (40, 4, 1)])
def test_greedy_ppd_equals_autoregressive(tiny, size, m, ept):
    for prompt in (PROMPT, "hello, world! 12"):
        ids = tiny.encode_prompt(prompt, False)
        ar = tokens(run(tiny, "autoregressive", ids))
        records = run(tiny, "ppd", ids, tree_size=size, prompt_tokens=m, ept=ept)
        assert tokens(records) == ar
        assert records[-1].target_calls == len(records)  # one forward pass per step
        assert all(r.extra["ppd"]["tree_size"] == size for r in records)


def _greedy_continuation(model, ids, n):
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids):]


def test_oracle_tree_accepts_greedy_branch_and_compaction_equals_fresh_pass(tiny):
    model, ids = tiny.model, tiny.encode_prompt(PROMPT, False)
    g = _greedy_continuation(model, ids, 4)
    other = lambda t: (t + 7) % tiny.vocab_size  # noqa: E731  a token that is not the greedy one
    tree = make_tree([(0,), (1,), (0, 0), (0, 1), (0, 0, 0)], [1, 2, 0, 1, 0, 1])
    tree_ids = [ids[-1], g[0], other(g[0]), g[1], other(g[1]), g[2]]
    prompts = untrained_prompt_tokens(tiny, 2, 1)
    L = len(ids)
    lm = CachedLM(model, tiny.device, tiny.vocab_size)
    with torch.inference_mode():
        lm.forward(ids[:-2])  # leave one uncached committed token before the root
        buffers = tree_buffers(tree, prefix_length=L - 1)
        logits = tree_forward(model, lm.cache, L - 2, [ids[-2]], tree_ids, buffers, prompts, tiny.device,
                              tiny.vocab_size)
        fresh = model(torch.tensor([ids + g[:3]])).logits[0].float()
    # root and candidates on the greedy branch see exactly the sequence: same logits as a plain pass
    for node, pos in [(0, L - 1), (1, L), (3, L + 1), (5, L + 2)]:
        torch.testing.assert_close(logits[node], fresh[pos], atol=1e-5, rtol=0)
    verdict = verify_greedy(buffers, tree_ids, logits)
    assert verdict.accepted == [1, 3, 5] and verdict.last == 5
    assert int(logits[verdict.last].argmax()) == g[3]
    assert len(prompt_predictions(buffers, logits, 5, 1)) == 1 and prompt_predictions(buffers, logits, 2, 1) == []

    # compaction: prefix + root + accepted branch, in order == the cache of a fresh pass
    compact_cache(lm.cache, L - 1, [L - 1 + c for c in [0] + verdict.accepted])
    lm.length = L + 3
    with torch.inference_mode():
        ref = DynamicCache(config=model.config)
        model(torch.tensor([ids + g[:3]]), past_key_values=ref, use_cache=True)
        for mine, theirs in zip(lm.cache.layers, ref.layers):
            torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-5, rtol=0)
            torch.testing.assert_close(mine.values, theirs.values, atol=1e-5, rtol=0)
        nxt = lm.forward([g[3]])[-1]
        want = model(torch.tensor([ids + g[:4]])).logits[0, -1].float()
    torch.testing.assert_close(nxt, want, atol=1e-5, rtol=0)


def test_typical_acceptance_picks_longest_passing_path():
    tree = make_tree([(0,), (1,), (0, 0)], 0)
    b = tree_buffers(tree)
    tree_ids = [0, 2, 3, 4]
    probs = torch.tensor([[0.05, 0.05, 0.5, 0.3, 0.1],
                          [0.1, 0.1, 0.1, 0.1, 0.6],
                          [0.2, 0.2, 0.2, 0.2, 0.2],
                          [0.2, 0.2, 0.2, 0.2, 0.2]])
    h = -(probs[0] * probs[0].log()).sum()
    assert typical_threshold(probs[0], 0.09, 0.3) == pytest.approx(min(0.09, 0.3 * math.exp(-h)))
    verdict = verify_typical(b, tree_ids, probs, 0.09, 0.3)
    assert verdict.accepted == [1, 3] and verdict.last == 3
    # node 1's child fails (p = 0.01): both depth-1 children pass, the first one wins the tie
    probs[1] = torch.tensor([0.96, 0.01, 0.01, 0.01, 0.01])
    assert verify_typical(b, tree_ids, probs, 0.09, 0.3).accepted == [1]
    # epsilon 0: threshold 0, every candidate with p > 0 passes; threshold 1: nothing passes
    assert verify_typical(b, tree_ids, probs, 0.0, 0.3).accepted == [1, 3]
    assert verify_typical(b, tree_ids, probs, 1.0, 1e9).accepted == []


def test_sampling_is_typical_acceptance_labelled_lossy_and_seeded(tiny):
    ids = tiny.encode_prompt(PROMPT, False)
    a = run(tiny, "ppd", ids, n=24, temperature=1.0, seed=3, tree_size=8)
    b = run(tiny, "ppd", ids, n=24, temperature=1.0, seed=3, tree_size=8)
    assert tokens(a) == tokens(b) and len(tokens(a)) == 24
    assert all(r.extra["ppd"]["verification"] == "typical acceptance (lossy)" for r in a)
    assert run(tiny, "ppd", ids, n=4, tree_size=8)[0].extra["ppd"]["verification"] == "exact match (lossless)"


def test_trace_carries_the_tree(tiny):
    ids = tiny.encode_prompt(PROMPT, False)
    records = run(tiny, "ppd", ids, n=30, tree_size=12)
    assert records[0].extra["ppd"]["state"] == 0 and records[0].extra["ppd"]["trained_embeddings"] is False
    for r in records:
        kinds = [n.kind for n in r.tree]
        assert kinds[0] == "root" and set(kinds) <= {"root", "candidate", "prompt"} and "prompt" in kinds
        assert all(n.index == i and n.parent < n.index for i, n in enumerate(r.tree))
        accepted = [n for n in r.tree if n.kind == "candidate" and n.accepted]
        assert len(accepted) == r.accepted_length
        if not r.finished:  # the last record's tokens may be cut at max-new-tokens
            assert len(r.emitted) == r.accepted_length + 1
            assert [n.token_id for n in sorted(accepted, key=lambda n: n.depth)] == [t.token_id for t in r.emitted[:-1]]
        n_cand = kinds.count("candidate")
        assert n_cand == r.extra["ppd"]["n_candidates"]
        assert n_cand + r.extra["ppd"]["n_prompt_inputs"] <= 12
        back = IterationRecord.from_dict(json.loads(json.dumps(r.to_dict())))
        assert back.tree == r.tree
    assert "target_logprobs" in records[0].extra


def test_cli_generate_ppd(tiny_target_dir, capsys):
    from decoding.cli import main

    base = ["generate", "--prompt", PROMPT, "--target", str(tiny_target_dir), "--temperature", "0",
            "--max-new-tokens", "12", "--ignore-eos", "--json"]
    assert main(base + ["--method", "ppd", "--tree-size", "6"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["summary"] and lines[-1]["method"] == "ppd"
    assert lines[0]["extra"]["ppd"]["tree_size"] == 6
    assert main(base + ["--method", "autoregressive"]) == 0
    ar = [json.loads(x) for x in capsys.readouterr().out.splitlines()][-1]
    assert ar["token_ids"] == lines[-1]["token_ids"]
    assert main(base + ["--method", "ppd", "--tree-size", "-1"]) == 2
    assert main(base + ["--method", "ppd", "--lenience", "0.5"]) == 2


def test_embeddings_inside_the_repo_are_named_by_relative_path(tmp_path):
    """Traces and the tuning cache record the embeddings' source: repo files by repo-relative path."""
    from decoding.paths import PPD_ASSETS as ASSETS, display_path as _display_path
    from decoding.methods.ppd.prompts import PromptTokens

    assert _display_path(ASSETS / "m" / "prompt_tokens.pt") == "assets/ppd/m/prompt_tokens.pt"
    outside = tmp_path / "prompt_tokens.pt"
    PromptTokens(3, 1, 4, trained=True).save(outside)
    assert PromptTokens.load(outside).source == str(outside)


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
    real = hardware.tree_forward

    def spy(model, cache, cached, pre, tree_ids, buffers, *rest, **kw):
        seen.append(buffers.size - 1)  # tree size n = rows after the root
        return real(model, cache, cached, pre, tree_ids, buffers, *rest, **kw)

    monkeypatch.setattr(hardware, "tree_forward", spy)
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


def test_training_mask_matches_inference_and_decayed_kl(tiny):
    """Prompt logits from the training pass (insertion after x_i) equal the inference pass on x_0..x_i."""
    prompts = untrained_prompt_tokens(tiny, 3, 2)
    prompts.weight.data += 0.1 * torch.randn_like(prompts.weight)  # groups differ
    x = torch.tensor(tiny.encode_prompt(PROMPT, False))
    i = 7
    with torch.no_grad():
        teacher, student = insertion_forward(tiny.model, x, [3, i], prompts)
        lm = CachedLM(tiny.model, tiny.device, tiny.vocab_size)
        buffers = tree_buffers(make_tree([], [3]), prefix_length=i, ept=2)
        logits = tree_forward(tiny.model, lm.cache, 0, x[:i].tolist(), [int(x[i])], buffers, prompts, tiny.device,
                              tiny.vocab_size)
        plain = tiny.model(x[None]).logits[0].float()
    torch.testing.assert_close(teacher, plain, atol=1e-5, rtol=0)
    for k, row in enumerate(prompt_predictions(buffers, logits, 0, 2)):
        torch.testing.assert_close(student[1, k], row, atol=1e-5, rtol=0)
    # decayed KL: zero when the student is the teacher at i + k; alpha^(k-1) weights otherwise
    V = 6
    t = torch.randn(2, V)
    assert float(decayed_kl(t[None], t[None], 0.5)) == pytest.approx(0.0, abs=1e-6)
    kl = lambda row: float((row.softmax(-1) * (row.log_softmax(-1) + math.log(V))).sum())  # noqa: E731
    uniform = torch.zeros(1, 2, V)
    assert float(decayed_kl(t[None], uniform, 0.5)) == pytest.approx((kl(t[0]) + 0.5 * kl(t[1])) / 2, rel=1e-5)
    past_end = torch.stack([t[0], torch.full((V,), float("nan"))])[None]
    assert float(decayed_kl(past_end, uniform, 0.5)) == pytest.approx(kl(t[0]) / 2, rel=1e-5)
    # hard_weight 1: pure cross-entropy on the teacher's argmax, with the same decay
    ce = lambda k: float(-uniform[0, k].log_softmax(-1)[t[k].argmax()])  # noqa: E731
    assert float(decayed_kl(t[None], uniform, 0.5, hard_weight=1.0)) == pytest.approx((ce(0) + 0.5 * ce(1)) / 2, rel=1e-5)
    assert float(decayed_kl(t[None], t[None], 0.5, hard_weight=0.5)) == pytest.approx(
        0.5 * (float(-t[0].log_softmax(-1).max()) + 0.5 * float(-t[1].log_softmax(-1).max())) / 2, rel=1e-5)


def test_cached_training_step_matches_full_pass_and_greedy_chain(tiny):
    """The two-part training pass (cache of x, then prompt rows with grad) gives the same prompt
    logits as the one-pass `insertion_forward`; data labels are the target's rows at i + k and
    chain labels the target's distributions after its own greedy continuation of x_0..x_i."""
    prompts = untrained_prompt_tokens(tiny, 3, 2)
    prompts.weight.data += 0.1 * torch.randn_like(prompts.weight)
    x = torch.tensor(tiny.encode_prompt(PROMPT + " jumps over", False))
    L = x.shape[0]
    points = [2, 5, L - 2]
    with torch.no_grad():
        full_teacher, full_student = insertion_forward(tiny.model, x, points, prompts)
        teacher, student = cached_insertion_step(tiny.model, x, points, prompts, labels="data")
    torch.testing.assert_close(student, full_student, atol=1e-5, rtol=0)
    for n, i in enumerate(points):
        for k in range(1, 4):
            if i + k < L:
                torch.testing.assert_close(teacher[n, k - 1], full_teacher[i + k], atol=1e-5, rtol=0)
            else:
                assert torch.isnan(teacher[n, k - 1]).all()
    chain_teacher, chain_student = cached_insertion_step(tiny.model, x, points, prompts, labels="chain")
    torch.testing.assert_close(chain_student.detach(), full_student, atol=1e-5, rtol=0)
    with torch.no_grad():
        for n, i in enumerate(points):
            seq = x[: i + 1].tolist()
            for k in range(1, 4):
                seq.append(int(tiny.model(torch.tensor([seq])).logits[0, -1].argmax()))  # g_k
                expected = tiny.model(torch.tensor([seq])).logits[0, -1].float()
                torch.testing.assert_close(chain_teacher[n, k - 1], expected, atol=1e-4, rtol=0)
    loss = decayed_kl(chain_teacher, chain_student, 0.8)
    loss.backward()
    assert prompts.weight.grad is not None and float(prompts.weight.grad.abs().sum()) > 0


def test_training_smoke_resume_and_export(tiny_target_dir, tmp_path):
    from decoding.lm.models import load_model
    from training.ppd_train import build_parser, train

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in (PROMPT, "hello there", "abc")))
    common = ["--target", str(tiny_target_dir), "--device", "cpu", "--out", str(tmp_path / "ck"),
              "--prompts", str(prompts), "--gen-tokens", "8", "--batch", "1", "--seq-len", "24", "--inserts", "4",
              "--dev", str(prompts), "--dev-tokens", "6", "--asset", str(tmp_path / "a" / "prompt_tokens.pt")]
    logs = []
    first = train(build_parser().parse_args(common + ["--steps", "2"]), logs.append)
    assert first["step"] == 2 and math.isfinite(first["loss"])
    second = train(build_parser().parse_args(common + ["--steps", "3", "--export"]), logs.append)
    assert second["step"] == 3 and any("resumed" in line for line in logs)
    card = json.loads((tmp_path / "a" / "card.json").read_text())
    assert card["steps"] == 3 and set(card["dev_accuracy"]) == {"@1_top1", "@1_top5", "@2_top1", "@2_top5"}
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    trained = load_prompt_tokens(target, tmp_path / "a" / "prompt_tokens.pt")
    assert trained.trained and trained.m == 3 and not trained.weight.requires_grad
    assert not torch.equal(trained.weight, untrained_prompt_tokens(target).weight)
    records = run(target, "ppd", target.encode_prompt(PROMPT, False), n=10, tree_size=6,
                  ppd_embeddings=str(tmp_path / "a" / "prompt_tokens.pt"))
    assert tokens(records) == tokens(run(target, "autoregressive", target.encode_prompt(PROMPT, False), n=10))
    assert records[0].extra["ppd"]["trained_embeddings"] is True
    # --init seeds every ensemble copy from an EPT-1 file; a file of another shape is a clear error
    init = common + ["--out", str(tmp_path / "ck2"), "--init", str(tmp_path / "a" / "prompt_tokens.pt"), "--steps", "0"]
    train(build_parser().parse_args(init + ["--ept", "2"]), logs.append)
    seeded = torch.load(tmp_path / "ck2" / "ckpt.pt", weights_only=False)["weight"]
    assert seeded.shape[1] == 2 and not torch.equal(seeded[:, 0], seeded[:, 1])
    torch.testing.assert_close(seeded, trained.weight.cpu().expand_as(seeded), atol=0.05, rtol=0)
    with pytest.raises(ValueError, match="--init"):
        train(build_parser().parse_args(init + ["--m", "2", "--fresh"]), logs.append)


@pytest.mark.slow
def test_greedy_ppd_equals_autoregressive_on_default_target(embedded_target):
    target = embedded_target
    ids = target.encode_prompt("Explain why the sky is blue in two sentences.", True)
    ar = tokens(run(target, "autoregressive", ids, n=16))
    records = run(target, "ppd", ids, n=16, tree_size=8)
    assert tokens(records) == ar
