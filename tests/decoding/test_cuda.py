"""The GPU path on the tiny random models: the exactness tests of methods/test_speculative.py,
methods/ppd/test_ppd.py and drafters/test_hybrid.py (and their neighbours) with the models on device
cuda, in float32 with TF32 off.

Marked `cuda`: `make gpu-check` runs them (`pytest -m cuda tests/decoding/test_cuda.py`); on a machine
without CUDA every test skips with NO_CUDA_REASON. A CPU test that is device-agnostic is called as
it is with the models on cuda. Where a CPU test builds CPU tensors by hand, the reference it
computes (the exact two-token distribution, the target's top tokens) comes from the CPU copy of the
same weights, and the tests that feed tensors to the model themselves are mirrored here with
their tensors on the model's device. Logits compared across differently shaped GPU passes get
rtol/atol 1e-4 (the CPU tests use atol 1e-5): cuBLAS may reduce in another order per shape.
"""

import json

import pytest
import torch
from transformers import DynamicCache

from decoding.drafters.output_head import subset_head
from decoding.lm.cached_lm import CachedLM
from decoding.lm.models import load_model
from decoding.methods.ppd.engine import compact_cache, tree_forward, verify_greedy
from decoding.methods.ppd.prompts import untrained_prompt_tokens
from decoding.methods.ppd.tree import make_tree, tree_buffers
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import Draft

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
test_cached_lm = load_test_module("decoding/lm/test_cached_lm.py")
test_hybrid = load_test_module("decoding/drafters/test_hybrid.py")
test_output_head = load_test_module("decoding/drafters/test_output_head.py")
test_ppd = load_test_module("decoding/methods/ppd/test_ppd.py")
test_feature_train = load_test_module("training/test_feature_train.py")
NO_CUDA_REASON = "no CUDA device here: the GPU path is checked by `make gpu-check` on a CUDA machine"
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA_REASON)]
CLOSE = {"rtol": 1e-4, "atol": 1e-4}


@pytest.fixture(autouse=True)
def no_tf32():
    """float32 means float32: TF32 matmuls would round the greedy argmax differently."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _on_cuda(*dirs):
    models = tuple(load_model(str(d), device="cuda", dtype="float32") for d in dirs)
    assert all(m.device.type == "cuda" and m.dtype == torch.float32 for m in models)
    return models


@pytest.fixture(scope="module")
def cuda_pair(tiny_target_dir, tiny_draft_dir):
    return _on_cuda(tiny_target_dir, tiny_draft_dir)


@pytest.fixture(scope="module")
def cuda_close_pair(tiny_target_dir, tiny_close_draft_dir):
    return _on_cuda(tiny_target_dir, tiny_close_draft_dir)


@pytest.fixture
def references_from_cpu(monkeypatch, tiny_close_pair):
    """test_speculative's exact distribution and test_output_head's top tokens, computed by the CPU copy of
    the (cuda) target: the GPU's samples are checked against the CPU's exact figures."""
    cpu_target = tiny_close_pair[0]
    exact, outside = test_speculative._exact_two_token_distribution, test_output_head._outside
    monkeypatch.setattr(test_speculative, "_exact_two_token_distribution",
                        lambda _t, ids, s: exact(cpu_target, ids, s))
    monkeypatch.setattr(test_output_head, "_outside", lambda _t, ids, s, k=2: outside(cpu_target, ids, s, k))


# ------------------------------------------------------------------ speculative decoding (test_speculative)
@pytest.mark.parametrize("gamma", [1, 2, 4, 7])
def test_greedy_speculative_equals_autoregressive_on_cuda(cuda_pair, gamma):
    test_speculative.test_greedy_speculative_equals_autoregressive(cuda_pair, gamma)


def test_greedy_prompt_lookup_equals_autoregressive_on_cuda(cuda_pair):
    test_speculative.test_greedy_prompt_lookup_equals_autoregressive(cuda_pair)


def test_sampled_speculative_matches_target_distribution_on_cuda(cuda_close_pair, references_from_cpu):
    test_speculative.test_sampled_speculative_matches_target_distribution(cuda_close_pair)


@pytest.mark.parametrize("which", ["target", "draft"])
def test_cache_rollback_matches_fresh_forward_on_cuda(cuda_pair, which):
    """test_cached_lm's rollback test, its fresh pass on the model's device."""
    model = cuda_pair[0] if which == "target" else cuda_pair[1]
    got, fresh, (length, expected_length) = test_cached_lm.rollback_and_fresh(model)
    torch.testing.assert_close(got, fresh, **CLOSE)
    assert got.argmax(-1).tolist() == fresh.argmax(-1).tolist()
    assert length == expected_length


# ------------------------------------------------------------------ PPD (test_ppd)
@pytest.mark.parametrize("size, m, ept", [(1, 3, 1), (4, 1, 1), (12, 3, 1), (24, 3, 2)])
def test_greedy_ppd_equals_autoregressive_on_cuda(cuda_pair, size, m, ept):
    test_ppd.test_greedy_ppd_equals_autoregressive(cuda_pair[0], size, m, ept)


def test_ppd_tree_pass_and_compaction_equal_fresh_passes_on_cuda(cuda_pair):
    """test_ppd's oracle tree test on the model's device: the greedy branch is accepted, its nodes'
    logits equal a plain pass, and the compacted cache equals a fresh pass's cache."""
    tiny = cuda_pair[0]
    model, ids, dev = tiny.model, tiny.encode_prompt(test_ppd.PROMPT, False), tiny.device
    with torch.inference_mode():
        g = []
        for _ in range(4):
            g.append(int(model(torch.tensor([ids + g], device=dev)).logits[0, -1].argmax()))
    other = lambda t: (t + 7) % tiny.vocab_size  # noqa: E731  a token that is not the greedy one
    tree = make_tree([(0,), (1,), (0, 0), (0, 1), (0, 0, 0)], [1, 2, 0, 1, 0, 1])
    tree_ids = [ids[-1], g[0], other(g[0]), g[1], other(g[1]), g[2]]
    L = len(ids)
    lm = CachedLM(model, dev, tiny.vocab_size)
    with torch.inference_mode():
        lm.forward(ids[:-2])
        buffers = tree_buffers(tree, prefix_length=L - 1)
        logits = tree_forward(model, lm.cache, L - 2, [ids[-2]], tree_ids, buffers,
                              untrained_prompt_tokens(tiny, 2, 1), dev, tiny.vocab_size)
        fresh = model(torch.tensor([ids + g[:3]], device=dev)).logits[0].float()
    for node, pos in [(0, L - 1), (1, L), (3, L + 1), (5, L + 2)]:
        torch.testing.assert_close(logits[node], fresh[pos], **CLOSE)
    verdict = verify_greedy(buffers, tree_ids, logits)
    assert verdict.accepted == [1, 3, 5] and verdict.last == 5
    assert int(logits[verdict.last].argmax()) == g[3]
    compact_cache(lm.cache, L - 1, [L - 1 + c for c in [0] + verdict.accepted])
    lm.length = L + 3
    with torch.inference_mode():
        ref = DynamicCache(config=model.config)
        model(torch.tensor([ids + g[:3]], device=dev), past_key_values=ref, use_cache=True)
        for mine, theirs in zip(lm.cache.layers, ref.layers):
            torch.testing.assert_close(mine.keys, theirs.keys, **CLOSE)
            torch.testing.assert_close(mine.values, theirs.values, **CLOSE)
        nxt = lm.forward([g[3]])[-1]
        want = model(torch.tensor([ids + g[:4]], device=dev)).logits[0, -1].float()
    torch.testing.assert_close(nxt, want, **CLOSE)


# ------------------------------------------------------------------ drafters (test_hybrid)
def test_hybrid_greedy_equals_autoregressive_on_cuda(cuda_pair):
    test_hybrid.test_hybrid_greedy_equals_autoregressive_and_uses_both_sources(cuda_pair)


@pytest.mark.parametrize("prompt, source", [(test_hybrid.COPYING, "lookup"), (test_speculative.PROMPT, "model")])
def test_hybrid_sampled_output_has_the_target_distribution_on_cuda(cuda_close_pair, prompt, source, monkeypatch,
                                                                   references_from_cpu):
    test_hybrid.test_hybrid_sampled_output_has_the_target_distribution(cuda_close_pair, prompt, source, monkeypatch)


def test_restricted_head_greedy_equals_autoregressive_on_cuda(cuda_pair):
    test_output_head.test_restricted_head_greedy_equals_autoregressive_when_the_target_argmax_is_outside(cuda_pair)


def test_restricted_head_sampled_output_has_the_target_distribution_on_cuda(cuda_close_pair, references_from_cpu):
    """test_output_head's restricted-head test with its generator on the model's device."""
    target, draft = cuda_close_pair
    sampling = SamplingConfig(temperature=2.0, top_k=4)
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    outside = set(test_output_head._outside(target, ids, sampling))
    head = subset_head(draft.model, [t for t in range(draft.vocab_size) if t not in outside])
    assert head.weight.device.type == "cuda"
    restricted = Draft.of_model(draft, head)
    generator = torch.Generator(device=target.device).manual_seed(0)
    proposal = restricted.drafter(target).propose(ids, 1, sampling, generator)
    assert all(float(proposal.q_rows[0, t]) == 0.0 for t in outside)
    test_speculative.test_sampled_speculative_matches_target_distribution((target, restricted))


# ------------------------------------------------------------------ the feature draft's stages (test_feature_train)

def test_feature_stages_run_on_cuda(smoke_run, tmp_path):
    """`training features` and `train-features --device cuda`: the states made on the GPU are the CPU's
    (bfloat16 storage), training runs there, and the draft it writes stays exact."""
    import dataclasses
    import shutil

    from decoding.run.pair import load_draft_value
    from training.feature_train import train as train_features
    from training.features import run as run_features

    cfg, cpu_target, *_ = smoke_run
    shutil.copytree(cfg.data_dir, tmp_path / "data")
    cfg = dataclasses.replace(cfg, bf16_autocast=False, data_dir=str(tmp_path / "data"), ckpt_dir=str(tmp_path / "ck"))
    (target,) = _on_cuda(cfg.target)
    out = run_features(cfg, {0, 1}, target=target, log=lambda _m: None)
    record = torch.load(sorted(out.glob("part-*.pt"))[0], weights_only=True)[0]
    full = torch.cat([record["prompt"], record["conts"][0]["tokens"]])
    with torch.inference_mode():
        fresh = cpu_target.model.get_decoder()(input_ids=full[None]).last_hidden_state[0]
    both = torch.cat([record["prompt_features"], record["conts"][0]["features"]]).float()
    assert both.device.type == "cpu" and torch.allclose(both, fresh, atol=2e-2)
    state = train_features(cfg, tmp_path / "fd", epochs=1, batch_tokens=64, lr=1e-3, head_tokens=20, target=target,
                           log=lambda _m: None, steps=2, device="cuda")
    assert state["step"] == state["total"] and all(h["reg"] == h["reg"] for h in state["history"])
    assert json.loads((tmp_path / "fd" / "training.json").read_text())["device"] == "cuda"
    draft = load_draft_value(str(tmp_path / "fd"), cpu_target, "float32")
    test_feature_train.assert_greedy_equals_autoregressive(cpu_target, draft)
