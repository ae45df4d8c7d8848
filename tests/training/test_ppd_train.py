"""Training PPD's prompt tokens (`training/ppd_train.py`): the training mask matches inference, the
cached two-part step, a smoke run that resumes and exports."""

import json
import math

import pytest
import torch

from decoding.lm.cached_lm import CachedLM
from decoding.methods.ppd.engine import prompt_predictions, tree_forward
from decoding.methods.ppd.prompts import load_prompt_tokens, untrained_prompt_tokens
from decoding.methods.ppd.tree import make_tree, tree_buffers
from training.ppd_train import cached_insertion_step, decayed_kl, insertion_forward

from _siblings import load_test_module

test_ppd = load_test_module("decoding/methods/ppd/test_ppd.py")
PROMPT, run, tokens, tiny = test_ppd.PROMPT, test_ppd.run, test_ppd.tokens, test_ppd.tiny


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
