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
from decoding.lm.hf_cache import cache_kwargs
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
        model(torch.tensor([ids + g[:3]], device=dev), **cache_kwargs(model, ref), use_cache=True)
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


# ------------------------------------------------------------------ the static cache and its CUDA graphs (test_static_lm)
# On CUDA the default backend ("auto") is the static cache with graphs, so every test above already runs it;
# these compare it with the eager static pass and the dynamic cache directly. Tolerances: float32 with TF32
# off atol/rtol 1e-4 (a graph replays the eager pass's kernels; only cuBLAS's choice per shape may differ);
# bfloat16 atol 0.1 on logits of magnitude ~10 (8 bits of mantissa, 2 layers).

def _static_lms(model):
    """(graphed, eager) StaticLMs of one cuda LoadedModel, on fresh caches."""
    from decoding.lm.cuda_graphs import GraphRunner
    from decoding.lm.static_lm import StaticLM

    graphed = StaticLM(model.model, model.device, model.vocab_size, capacity=256,
                       graphs=GraphRunner(model.model, model.device))
    eager = StaticLM(model.model, model.device, model.vocab_size, capacity=256)
    return graphed, eager


def _same_passes(model, tolerance):
    """Prefill, one-token steps, 5-token verify passes with rollbacks (each shape seen often enough to be
    captured and then replayed): the graphed LM's logits equal the eager static LM's at every pass."""
    graphed, eager = _static_lms(model)
    ids = model.encode_prompt(test_speculative.PROMPT, chat=False)
    seq = list(ids)
    for lm in (graphed, eager):
        lm.extend(seq)
    for step in range(6):
        a, b = graphed.extend(seq, [3, 4, 5, 6, 7]), eager.extend(seq, [3, 4, 5, 6, 7])  # a verify pass
        torch.testing.assert_close(a, b, **tolerance)
        for lm in (graphed, eager):
            lm.rollback(len(seq))
        x = int(b[0].argmax())
        a, b = graphed.forward([x]), eager.forward([x])  # a one-token step
        torch.testing.assert_close(a, b, **tolerance)
        seq.append(x)
        assert graphed.length == eager.length == len(seq)
    runner = graphed.graphs
    assert runner.failed is None, runner.failed
    assert {key[0] for key in runner.graphs} == {(1, 5), (1, 1)}  # one graph per pass size, both replayed
    return graphed


def test_graph_replay_equals_the_eager_static_pass_float32(cuda_pair):
    _same_passes(cuda_pair[0], CLOSE)


def test_graph_replay_equals_the_eager_static_pass_bfloat16(tiny_target_dir):
    model = load_model(str(tiny_target_dir), device="cuda", dtype="bfloat16")
    _same_passes(model, {"atol": 0.1, "rtol": 0.02})


@pytest.mark.parametrize("lean", ["1", "0"], ids=["lean-layer", "hf-modules"])
def test_static_cache_equals_the_dynamic_cache_on_cuda(cuda_pair, monkeypatch, lean):
    """The static LM (graphed) against today's dynamic CachedLM over the same passes, its short passes on the
    lean layer (lm/lean_layer.py, the default) and on HF's modules (SPECDEC_LEAN_LAYER=0)."""
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
    model = cuda_pair[0]
    graphed, _ = _static_lms(model)
    dynamic = CachedLM(model.model, model.device, model.vocab_size)
    ids = model.encode_prompt(test_speculative.PROMPT, chat=False)
    for lm in (graphed, dynamic):
        lm.extend(ids)
    seq = list(ids)
    for _ in range(5):
        a, b = graphed.extend(seq, [9, 10, 11]), dynamic.extend(seq, [9, 10, 11])
        torch.testing.assert_close(a, b, **CLOSE)
        for lm in (graphed, dynamic):
            lm.rollback(len(seq) + 1)
        seq.append(9)


def _graph_vs_eager_tokens(monkeypatch, target, draft, gamma, extra=None):
    from decoding.lm import backend
    from decoding.methods.base import RunConfig
    from decoding.run.runner import decode

    config = RunConfig(method="speculative", max_new_tokens=40, sampling=SamplingConfig(0.0), gamma=gamma,
                       stop_at_eos=False, extra=extra or {})
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    out = {}
    try:
        backend.set_backend("static")
        for graphs in ("0", "1"):
            monkeypatch.setenv(backend.GRAPHS_ENV, graphs)
            backend._spare.clear()  # fresh caches for every model of the run
            out[graphs] = [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]
            out[graphs + "-backend"] = backend.describe(target.model)
    finally:
        backend.set_backend(None)
    base = RunConfig(method="autoregressive", max_new_tokens=40, sampling=SamplingConfig(0.0), stop_at_eos=False)
    with monkeypatch.context() as m:
        m.setenv(backend.BACKEND_ENV, "dynamic")
        plain = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    return out, plain


@pytest.mark.parametrize("gamma", [2, 4])
def test_graphs_on_and_off_give_the_same_greedy_tokens_with_the_draft_model(cuda_pair, monkeypatch, gamma):
    out, plain = _graph_vs_eager_tokens(monkeypatch, cuda_pair[0], cuda_pair[1], gamma)
    assert out["1"] == out["0"] == plain and len(plain) == 40
    assert out["1-backend"] == {"backend": "static+cuda-graphs", "backend_note": None}
    assert out["0-backend"]["backend"] == "static"


def test_graphs_on_and_off_give_the_same_greedy_tokens_with_the_feature_draft(cuda_pair, tiny_feature_dir,
                                                                               monkeypatch):
    from decoding.run.pair import load_draft_value

    target = cuda_pair[0]
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    for draft in (feature, feature.hybrid()):
        out, plain = _graph_vs_eager_tokens(monkeypatch, target, draft, 3)
        assert out["1"] == out["0"] == plain and len(plain) == 40
        assert out["1-backend"]["backend"] == "static+cuda-graphs"


def test_draft_trees_with_graphs_on_and_off_give_plain_decodings_greedy_tokens(cuda_pair, tiny_feature_dir,
                                                                                monkeypatch):
    """Trees from the distilled and the feature draft on the static path (the drafts' tree passes go through the
    static cache's masked pass, lm/tree_pass.py): graphs on and off, the same tokens as plain decoding."""
    from decoding.run.pair import load_draft_value

    target = cuda_pair[0]
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    for draft in (cuda_pair[1], feature, feature.hybrid()):
        out, plain = _graph_vs_eager_tokens(monkeypatch, target, draft, 4,
                                            extra={"draft_tree": "6,3", "gamma_schedule": "fixed"})
        assert out["1"] == out["0"] == plain and len(plain) == 40
        assert out["1-backend"]["backend"] == "static+cuda-graphs"


def test_graphs_are_captured_again_after_the_earlier_graphs_are_gone(tiny_target_dir):
    """Runs whose caches and graphs were dropped, then new captures: no capture fails (a graph pool shared
    beyond its graphs' lifetime made PyTorch's allocator assert on an H200, torch 2.11)."""
    import gc

    from decoding.lm import backend
    from decoding.lm.cuda_graphs import failure
    from decoding.methods.base import RunConfig
    from decoding.run.runner import decode

    config = RunConfig(method="autoregressive", max_new_tokens=12, sampling=SamplingConfig(0.0), stop_at_eos=False)
    outputs = []
    try:
        backend.set_backend("static")
        for dtype in ("bfloat16", "float32", "float32"):
            target = load_model(str(tiny_target_dir), device="cuda", dtype=dtype)
            ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
            outputs.append([t.token_id for r in decode(target, None, ids, config) for t in r.emitted])
            assert failure(target.model) is None
            assert backend.describe(target.model) == {"backend": "static+cuda-graphs", "backend_note": None}
            backend._spare.clear()
            gc.collect()
    finally:
        backend.set_backend(None)
    assert outputs[1] == outputs[2]


def test_a_failed_capture_falls_back_to_eager_static_passes(tiny_target_dir, monkeypatch):
    """A capture that raises: the run finishes on eager static passes with the same tokens, the reason is
    recorded once for the model, and later LMs of that model do not try again. (Its own model: the
    failure is remembered per model.)"""
    import decoding.lm.cuda_graphs as cuda_graphs
    from decoding.lm import backend
    from decoding.methods.base import RunConfig
    from decoding.run.runner import decode

    (target,) = _on_cuda(tiny_target_dir)
    calls = []

    class Broken:
        def __init__(self, *a, **kw):
            calls.append(1)
            raise RuntimeError("capture is not allowed here")

    monkeypatch.setattr(cuda_graphs.torch.cuda, "graph", Broken)
    config = RunConfig(method="autoregressive", max_new_tokens=24, sampling=SamplingConfig(0.0), stop_at_eos=False)
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    try:
        backend.set_backend("static")
        got = [t.token_id for r in decode(target, None, ids, config) for t in r.emitted]
        described = backend.describe(target.model)
        again = [t.token_id for r in decode(target, None, ids, config) for t in r.emitted]
        backend.set_backend("dynamic")
        want = [t.token_id for r in decode(target, None, ids, config) for t in r.emitted]
    finally:
        backend.set_backend(None)
    assert got == again == want and len(got) == 24
    assert described["backend"] == "static" and "capture failed" in described["backend_note"]
    assert "capture is not allowed here" in cuda_graphs.failure(target.model)
    assert len(calls) == 1  # once per model


@pytest.mark.parametrize("lean", ["1", "0"], ids=["lean-layer", "whole-body"])
def test_compiled_static_passes_give_the_same_greedy_tokens_with_and_without_graphs(cuda_pair, monkeypatch, lean):
    """SPECDEC_COMPILE=1 (lm/compiled_body.py): inductor's kernels, eager and captured, give plain decoding's
    greedy tokens (prompt lookup: one model compiles, which keeps this test to tens of seconds); compiled is the
    lean layer's step (regional) or, with SPECDEC_LEAN_LAYER=0, the whole short pass."""
    from decoding.lm import compiled_body

    monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
    monkeypatch.setenv(compiled_body.ENV, "1")
    compiled_body.reset()
    try:
        out, plain = _graph_vs_eager_tokens(monkeypatch, cuda_pair[0], "prompt-lookup", 3)
        assert compiled_body.failure() is None, compiled_body.failure()
    finally:
        compiled_body.reset()
    assert out["1"] == out["0"] == plain and len(plain) == 40
    assert out["1-backend"] == {"backend": "static+cuda-graphs+compiled", "backend_note": None}


# ------------------------------------------------------------------ draft chains as one graph (lm/chain_graphs.py)
# Real replays of a captured greedy chain (SPECDEC_DRAFT_CHAIN_GRAPH, off by default) against the eager chain at
# several base positions, after the capture: the same token ids, and in float32 with TF32 off the keys/values the
# chain's passes wrote and the feature draft's last predicted feature within CLOSE (atol/rtol 1e-4: the same
# kernels, only cuBLAS's choice per call may differ).

def _chain_slots(lm, start: int, steps: int) -> list[torch.Tensor]:
    """Copies of every layer's keys and values at slots [start, start + steps) of a static LM."""
    return [torch.cat([layer.keys[:, :, start: start + steps], layer.values[:, :, start: start + steps]]).clone()
            for layer in lm.cache.layers]


def _compare_chains(lm, start, eager, graphed, gamma: int) -> None:
    """`eager()` and `graphed()` each run one chain of `gamma` from `lm`'s length `start` and return (ids, last
    hidden or None); the LM is put back to `start` after each. Their ids are equal, their writes and hidden close."""
    calls = lm.calls
    want_ids, want_hidden = eager()
    want_kv = _chain_slots(lm, start, gamma - 1)
    lm.rollback(start)
    lm.calls = calls
    out = graphed()
    assert out is not None, "the chain graph did not run"
    got_ids, got_hidden = out
    assert lm.length == start + gamma - 1 and lm.calls == calls + gamma - 1
    got_kv = _chain_slots(lm, start, gamma - 1)
    lm.rollback(start)
    lm.calls = calls
    assert got_ids.tolist() == want_ids.tolist()
    for a, b in zip(got_kv, want_kv):
        torch.testing.assert_close(a, b, **CLOSE)
    if want_hidden is not None:
        torch.testing.assert_close(got_hidden, want_hidden, **CLOSE)


@pytest.mark.parametrize("kind", ["model", "feature"])
def test_draft_chain_graph_replays_equal_the_eager_chain(cuda_pair, tiny_feature_dir, kind, monkeypatch):
    from decoding.drafters.chain_graph import feature_chain, model_chain
    from decoding.drafters.model import ModelDrafter
    from decoding.lm import backend, chain_graphs, cuda_graphs
    from decoding.run.pair import load_draft_value

    target, draft = cuda_pair
    gamma = 4
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    cuda_graphs.reset_counts()
    try:
        backend.set_backend("static")
        backend._spare.clear()
        if kind == "model":
            drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
        else:
            drafter = load_draft_value(str(tiny_feature_dir), target, "float32").drafter(target)
            target_lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size)
            drafter.attach_target(target_lm)
            target_lm.extend(ids[:-1])
        lm = drafter.lm
        assert lm.graphs is not None  # the static backend with graphs, as on CUDA by default
        for i, m in enumerate((len(ids) - 8, len(ids) - 8, len(ids) - 4, len(ids))):  # the first base: seen, captured
            if kind == "model":
                drafter.rollback(m - 1)
                first = lm.extend(ids[:m], keep=1)[-1].argmax()

                def eager():
                    picks = [first]
                    for _ in range(gamma - 1):
                        picks.append(lm.forward_ids(picks[-1].view(1, 1))[-1].argmax())
                    return torch.stack(picks[1:]), None

                def graphed():
                    monkeypatch.setattr(chain_graphs, "ENABLED", True)
                    out = model_chain(lm, first, gamma)
                    monkeypatch.setattr(chain_graphs, "ENABLED", False)
                    return out
            else:
                feature, _ = drafter._catch_up(ids[:m])

                def eager():
                    f, picks = feature, []
                    for i in range(gamma):
                        picks.append(drafter.head.token_ids.index_select(0, drafter.head.sub_logits(f)[-1].argmax()
                                                                          .view(1)))
                        if i + 1 < gamma:
                            f = drafter._pass(f, picks[-1], lm.length)[-1:]
                    return torch.cat(picks), f

                def graphed():
                    monkeypatch.setattr(chain_graphs, "ENABLED", True)
                    out = feature_chain(drafter, feature, gamma, keep_hidden=True)
                    monkeypatch.setattr(chain_graphs, "ENABLED", False)
                    return out
            start = lm.length
            if i == 0:
                assert graphed() is None and lm.length == start  # the first sighting: the caller's eager chain
                continue
            _compare_chains(lm, start, eager, graphed, gamma)
    finally:
        backend.set_backend(None)
        monkeypatch.setattr(chain_graphs, "ENABLED", None)
    assert chain_graphs.failure(lm.model) is None, chain_graphs.failure(lm.model)
    assert cuda_graphs.counts()["chain_captures"] == 1 and cuda_graphs.counts()["chain_replays"] == 3


def test_runs_with_draft_chain_graphs_give_plain_decodings_greedy_tokens(cuda_pair, tiny_feature_dir, monkeypatch):
    """Whole greedy runs at gamma 4 with SPECDEC_DRAFT_CHAIN_GRAPH=1: the draft model, the feature draft and the
    hybrid give plain decoding's tokens (and those of the switch off), having replayed chains, with no failure."""
    from decoding.lm import chain_graphs, cuda_graphs
    from decoding.run.pair import load_draft_value

    target = cuda_pair[0]
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    for draft in (cuda_pair[1], feature, feature.hybrid()):
        outs = {}
        for on in ("0", "1"):
            monkeypatch.setenv(chain_graphs.ENV, on)
            cuda_graphs.reset_counts()
            outs[on], plain = _graph_vs_eager_tokens(monkeypatch, target, draft, 4,
                                                     extra={"gamma_schedule": "fixed"})
            replays = cuda_graphs.counts().get("chain_replays", 0)
            assert replays > 0 if on == "1" else replays == 0
        assert outs["1"]["1"] == outs["0"]["1"] == outs["1"]["0"] == plain and len(plain) == 40
        assert outs["1"]["1-backend"] == {"backend": "static+cuda-graphs", "backend_note": None}
        drafting = draft.model if draft is cuda_pair[1] else draft.feature
        assert chain_graphs.failure(drafting) is None, chain_graphs.failure(drafting)


def test_chains_captured_in_one_run_replay_in_the_next(cuda_pair, tiny_feature_dir, monkeypatch):
    """A static LM's cache and graph runner go to its model's next LM when it is collected (backend.py), chains
    included: the next run replays the chains the first run captured (what they read besides the model and the
    cache is the chain's own, not the collected LM's) and gives the same tokens. The first run ran its first chain
    of each shape eagerly; the second replays from its first chain on, so it counts more replays."""
    import gc

    from decoding.lm import backend, chain_graphs, cuda_graphs
    from decoding.methods.base import RunConfig
    from decoding.run.pair import load_draft_value
    from decoding.run.runner import decode

    target = cuda_pair[0]
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    config = RunConfig(method="speculative", max_new_tokens=40, sampling=SamplingConfig(0.0), gamma=4,
                       stop_at_eos=False, extra={"gamma_schedule": "fixed"})
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    monkeypatch.setenv(chain_graphs.ENV, "1")
    try:
        backend.set_backend("static")
        for draft in (cuda_pair[1], feature):
            backend._spare.clear()
            runs = []
            for _ in range(2):
                cuda_graphs.reset_counts()
                tokens = [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]
                gc.collect()  # the run's LMs go, their caches and runners back to the pool
                runs.append((tokens, cuda_graphs.counts().get("chain_replays", 0)))
            assert runs[0][0] == runs[1][0] and len(runs[0][0]) == 40
            assert runs[1][1] > runs[0][1] > 0, runs
    finally:
        backend.set_backend(None)
        backend._spare.clear()
