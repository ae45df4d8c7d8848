"""The static-shape cache LM (`decoding/lm/static_lm.py`) on tiny random models in float32: every method
gives the same tokens on it as on the dynamic cache (greedy and seeded sampling); rollback and PPD's
compaction on it equal fresh passes; it grows past its capacity; batching keeps the dynamic path.

Logits compared across the two caches get atol 5e-5 (the CPU tests' tolerance elsewhere is 1e-5; logits
here reach about 8): the static pass attends over the whole buffer, with blocked slots weighted exactly
0, and its short passes run slot attention and fused RMS norms (`static_kernels.py`), so only the
kernels' summation order differs (measured: 2e-5 at most, where the dynamic cache is 1.1e-5 from a
fresh pass)."""

import pytest
import torch

from decoding.lm import backend, batching
from decoding.lm.cached_lm import CachedLM
from decoding.lm.static_lm import DEFAULT_CAPACITY, ROUND, StaticLM, round_capacity
from decoding.methods.base import RunConfig
from decoding.methods.tree_draft import TreeDraftStep
from decoding.methods.ppd.engine import lm_tree_forward, tree_forward
from decoding.methods.ppd.prompts import untrained_prompt_tokens
from decoding.methods.ppd.tree import dynamic_trees, tree_buffers
from decoding.methods.registry import METHODS
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode, summarize

PROMPT = "hello world, the cat"
GREEDY = SamplingConfig(temperature=0.0)
SAMPLED = SamplingConfig(temperature=0.8, top_k=20)
CLOSE = {"atol": 5e-5, "rtol": 1e-5}


@pytest.fixture
def use_backend():
    """Set the process backend for one test, and put it back."""
    yield backend.set_backend
    backend.set_backend(None)


def _run(target, draft, config, name):
    backend.set_backend(name)
    ids = target.encode_prompt(PROMPT, chat=False)
    records = list(decode(target, draft, ids, config))
    return [t.token_id for r in records for t in r.emitted], records


def _drafts(tiny_pair, tiny_feature_dir):
    target, draft = tiny_pair
    return {"model": draft, "feature": load_draft_value(str(tiny_feature_dir), target, "float32"),
            "prompt-lookup": "prompt-lookup"}


def _cases():
    """(method, drafter kind) for every method in the registry (each drafter for a drafting method)."""
    for name, spec in METHODS.items():
        if not spec.uses_drafter:
            yield name, None
        elif spec.needs_draft_model:
            yield name, "model"
        else:
            yield from ((name, kind) for kind in ("model", "feature", "prompt-lookup"))


@pytest.mark.parametrize("sampling,lean", [(GREEDY, "1"), (SAMPLED, "1"), (GREEDY, "0")],
                         ids=["greedy", "seeded-sampling", "greedy-hf-modules"])
@pytest.mark.parametrize("method,drafter", list(_cases()))
def test_static_gives_the_dynamic_tokens(tiny_pair, tiny_feature_dir, use_backend, monkeypatch, method, drafter,
                                         sampling, lean):
    """Short static passes run the lean layer (`lean_layer.py`, the default) or, with SPECDEC_LEAN_LAYER=0, HF's
    modules with the short-pass kernels: the same tokens either way."""
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
    target = tiny_pair[0]
    draft = _drafts(tiny_pair, tiny_feature_dir)[drafter] if drafter else None
    config = RunConfig(method=method, max_new_tokens=24, sampling=sampling, gamma=3, stop_at_eos=False, seed=7)
    expected, _ = _run(target, draft, config, "dynamic")
    got, records = _run(target, draft, config, "static")
    assert got == expected
    assert len(got) == 24
    assert backend.describe(target.model)["backend"] == "static"
    summary = summarize(records, config, PROMPT, target, draft if not isinstance(draft, str) else None)
    assert summary.models["backend"] == "static"


def test_the_loops_get_static_lms(tiny_pair, tiny_feature_dir, use_backend):
    """The factory builds the static variant of each class: the target's, the draft model's, the feature draft's."""
    target, draft = tiny_pair
    use_backend("static")
    feature = load_draft_value(str(tiny_feature_dir), target, "float32").drafter(target)
    assert type(feature.lm).__name__ == "StaticFeatureDraftLM" and feature.lm.returns_hidden
    from decoding.drafters.model import ModelDrafter

    assert isinstance(ModelDrafter(draft.model, draft.device, draft.vocab_size, "d").lm, StaticLM)
    use_backend("dynamic")
    assert type(ModelDrafter(draft.model, draft.device, draft.vocab_size, "d").lm) is CachedLM


def test_rollback_equals_a_fresh_pass(tiny_pair):
    """Extend by 4 drafts, roll back to one accepted, extend again: the logits equal an uncached pass
    over the same sequence, and the slots past the length were overwritten, not copied."""
    target = tiny_pair[0]
    ids = target.encode_prompt(PROMPT, chat=False)
    lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="static")
    assert isinstance(lm, StaticLM)
    lm.extend(ids, [5, 6, 7, 8])
    lm.rollback(len(ids) + 1)
    assert lm.length == len(ids) + 1
    got = lm.extend(ids + [5], [9, 10])
    with torch.inference_mode():
        fresh = target.model(torch.tensor([ids + [5, 9, 10]])).logits[0, -2:, : target.vocab_size].float()
    assert torch.allclose(got, fresh, **CLOSE)
    assert lm.length == len(ids) + 3


@pytest.mark.parametrize("lean", ["1", "0"], ids=["lean-layer", "hf-modules"])
def test_same_pass_size_runs_the_same_shapes(tiny_pair, monkeypatch, lean):
    """A pass of n tokens hands attention the whole buffer and an (1, 1, n, C) mask at any length."""
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
    target = tiny_pair[0]
    lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="static")
    shapes = []
    real = lm.body_pass  # every pass of at most MAX_GRAPH_TOKENS tokens, the shapes a graph captures

    def spy(inputs, positions, slots, mask):
        shapes.append((tuple(inputs.shape), tuple(positions.shape), tuple(mask.shape)))
        assert slots.shape == inputs.shape[1:2]
        return real(inputs, positions, slots, mask)

    lm.body_pass = spy
    lm.forward([3, 4, 5, 6, 7])
    lm.forward([8])
    lm.forward([9])
    lm.forward([1, 2, 3])
    lm.rollback(6)
    lm.forward([1, 2, 3])
    c = lm.capacity
    assert shapes == [((1, 5), (1, 5), (1, 1, 5, c)), ((1, 1), (1, 1), (1, 1, 1, c)), ((1, 1), (1, 1), (1, 1, 1, c)),
                      ((1, 3), (1, 3), (1, 1, 3, c)), ((1, 3), (1, 3), (1, 1, 3, c))]


def _ppd_pass_and_compact(lm, target, ids):
    """One PPD tree pass after the context, then compaction to the root and the first candidate branch."""
    prompts = untrained_prompt_tokens(target)
    trees = dynamic_trees(6, prompts.m, prompts.ept)
    buffers = tree_buffers(trees.trees[1], prefix_length=len(ids) - 1, ept=prompts.ept)
    tree_ids = [ids[-1]] + [4 + i for i in range(buffers.n_candidates)]
    lm.extend(ids[:-2])
    logits = lm_tree_forward(lm, [ids[-2]], tree_ids, buffers, prompts)
    keep = [len(ids) - 1, len(ids)]  # the root and the first candidate, by absolute slot
    lm.compact(len(ids) - 1, keep)
    return logits, tree_ids


def test_tree_pass_and_compaction_equal_the_dynamic_path_and_a_fresh_pass(tiny_pair):
    target = tiny_pair[0]
    ids = target.encode_prompt(PROMPT, chat=False)
    static = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="static")
    dynamic = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="dynamic")
    got, tree_ids = _ppd_pass_and_compact(static, target, ids)
    want, _ = _ppd_pass_and_compact(dynamic, target, ids)
    assert torch.allclose(got, want, **CLOSE)
    assert static.length == dynamic.length == len(ids) + 1
    # after compaction the cache holds the context + root + first candidate: the next step's logits
    # equal an uncached pass over that sequence
    seq = ids + [tree_ids[1]]
    step = static.extend(seq, [7])
    with torch.inference_mode():
        fresh = target.model(torch.tensor([seq + [7]])).logits[0, -1:, : target.vocab_size].float()
    assert torch.allclose(step[-1:], fresh, **CLOSE)
    assert torch.allclose(dynamic.extend(seq, [7])[-1:], fresh, **CLOSE)


def test_tree_forward_keeps_its_dynamic_signature(tiny_pair):
    """PPD's tree_forward on a bare DynamicCache (training uses it) equals lm_tree_forward on a CachedLM."""
    from transformers import DynamicCache

    target = tiny_pair[0]
    ids = target.encode_prompt(PROMPT, chat=False)
    prompts = untrained_prompt_tokens(target)
    buffers = tree_buffers(dynamic_trees(4, prompts.m, prompts.ept).trees[0], prefix_length=len(ids) - 1,
                           ept=prompts.ept)
    with torch.inference_mode():
        a = tree_forward(target.model, DynamicCache(), 0, ids[:-1], [ids[-1]], buffers, prompts, target.device,
                         target.vocab_size)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    b = lm_tree_forward(lm, ids[:-1], [ids[-1]], buffers, prompts)
    assert torch.equal(a, b)


def test_capacity_grows_by_reallocation(tiny_pair):
    """Past its capacity the cache re-allocates (twice the room, rounded), keeping what it held."""
    target = tiny_pair[0]
    lm = StaticLM(target.model, target.device, target.vocab_size, capacity=10)  # a new cache, not a pooled one
    assert lm.capacity == ROUND == round_capacity(10)
    seq = [(3 * i) % 40 + 3 for i in range(ROUND + 20)]
    lm.extend(seq[:ROUND - 2])
    got = lm.extend(seq, keep=1)
    assert lm.capacity == 2 * ROUND and lm.length == len(seq)
    with torch.inference_mode():
        fresh = target.model(torch.tensor([seq])).logits[0, -1:, : target.vocab_size].float()
    assert torch.allclose(got, fresh, atol=1e-4)
    assert round_capacity(DEFAULT_CAPACITY + 1) == DEFAULT_CAPACITY + ROUND


def test_backend_choice_and_its_name(tiny_pair, use_backend, monkeypatch):
    target = tiny_pair[0]
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    assert backend.requested_backend() == "auto"
    assert backend.choose(target.model, "cpu") == ("dynamic", None)  # auto on a CPU: measured slower
    assert backend.choose(target.model, "cuda") == ("static", None)
    monkeypatch.setenv(backend.BACKEND_ENV, "static")
    assert backend.requested_backend() == "static"
    use_backend("dynamic")  # the CLI's flag wins over the env
    assert backend.choose(target.model, "cpu") == ("dynamic", None)
    with pytest.raises(ValueError, match="unknown backend 'fast'; choose one of: auto, static, dynamic"):
        use_backend("fast")
    monkeypatch.setenv(backend.BACKEND_ENV, "fast")
    use_backend(None)
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        backend.requested_backend()
    # graphs: CUDA only, off with SPECDEC_CUDA_GRAPHS=0, on ZeroGPU only when asked
    monkeypatch.delenv(backend.GRAPHS_ENV, raising=False)
    monkeypatch.delenv(backend.ZERO_GPU_ENV, raising=False)
    assert not backend.graphs_wanted("cpu") and backend.graphs_wanted("cuda")
    monkeypatch.setenv(backend.GRAPHS_ENV, "0")
    assert not backend.graphs_wanted("cuda")
    monkeypatch.delenv(backend.GRAPHS_ENV)
    monkeypatch.setenv(backend.ZERO_GPU_ENV, "true")
    assert not backend.graphs_wanted("cuda")
    monkeypatch.setenv(backend.ZEROGPU_GRAPHS_ENV, "1")
    assert backend.graphs_wanted("cuda")
    assert backend.graphs_note("cuda") is None
    monkeypatch.delenv(backend.ZEROGPU_GRAPHS_ENV)  # on ZeroGPU the static cache runs eagerly, and says so
    assert "ZeroGPU" in backend.graphs_note("cuda") and backend.graphs_note("cpu") is None


def test_batching_keeps_the_dynamic_path(tiny_pair, use_backend):
    """With cross-run batching on, a static request builds a dynamic LM and says why."""
    target = tiny_pair[0]
    use_backend("static")
    batching.enable(max_batch=4, window_s=0.0)
    try:
        lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size)
        assert type(lm) is CachedLM
        described = backend.describe(target.model)
        assert described["backend"] == "dynamic" and "batching" in described["backend_note"]
    finally:
        batching.disable()
    # a static LM never hands its calls to the batcher, even when batching is switched on later
    lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size)
    batching.enable(max_batch=4, window_s=0.0)
    try:
        assert lm.forward([3, 4, 5]).shape == (3, target.vocab_size) and lm.calls == 1
    finally:
        batching.disable()


def test_a_static_cache_is_reused_after_its_lm_is_gone(tiny_pair):
    target = tiny_pair[0]
    import gc

    gc.collect()
    backend._spare.pop(target.model, None)  # the earlier tests' spare caches (the pool keeps a few)
    lm = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="static")
    cache = lm.cache
    del lm
    gc.collect()
    again = backend.make_lm(CachedLM, target.model, target.device, target.vocab_size, backend="static")
    assert again.cache is cache and again.length == 0


def test_static_gives_the_dynamic_tokens_on_the_default_target(embedded_target, use_backend, monkeypatch):
    """SmolLM2-135M-Instruct in float32, 32 greedy tokens: plain decoding and the hybrid with the shipped
    feature draft give the same tokens on the static cache (its short passes on the lean layer, and with
    SPECDEC_LEAN_LAYER=0 on HF's modules) as on the dynamic one."""
    target = embedded_target
    hybrid = load_draft_value("feature", target, "float32").hybrid()
    ids = target.encode_prompt("Explain why the sky is blue in two sentences.", chat=True)
    for method, draft in (("autoregressive", None), ("speculative", hybrid)):
        config = RunConfig(method=method, max_new_tokens=32, sampling=GREEDY, gamma=4, chat=True, lean=True,
                           stop_at_eos=False)
        runs = {}
        for name, lean in (("dynamic", "1"), ("static", "1"), ("static", "0")):
            monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
            use_backend(name)
            runs[name, lean] = [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]
            assert backend.describe(target.model)["backend"] == name
        want = runs["dynamic", "1"]
        assert runs["static", "1"] == want and runs["static", "0"] == want and len(want) == 32, method


class _FakeGraph:
    """A stand-in for a CUDA graph on the CPU: recording runs the pass once, a replay runs it again into the
    same output tensor, so the runner's plumbing (static buffers, copies in, the output cloned) is checked
    without a GPU. (tests/decoding/test_cuda.py checks real graphs.)"""

    def __init__(self, one_pass):
        self.one_pass = one_pass
        self.output = one_pass()
        self.replays = 0

    def replay(self):
        fresh = self.one_pass()
        if isinstance(self.output, tuple):  # a draft chain's (ids, hidden) (lm/chain_graphs.py)
            for out, new in zip(self.output, fresh):
                out.copy_(new)
        else:
            self.output.copy_(fresh)
        self.replays += 1

    def pool(self):
        return ("pool", id(self))


@pytest.fixture
def fake_graphs(monkeypatch):
    """GraphRunner on the CPU with _FakeGraph for torch.cuda's graph, and graphs wanted on any device."""
    import decoding.lm.cuda_graphs as cuda_graphs

    made = []

    def record(device, one_pass, pool=None):
        assert pool is None or pool in {g.pool() for g in made}  # a runner's graphs share its first graph's pool
        made.append(_FakeGraph(one_pass))
        return made[-1], made[-1].output

    monkeypatch.setattr(cuda_graphs, "warm_up", lambda device, one_pass: [one_pass() for _ in range(2)])
    monkeypatch.setattr(cuda_graphs, "record", record)
    monkeypatch.setattr(backend, "graphs_wanted", lambda device: True)
    backend._spare.clear()
    yield made
    backend._spare.clear()


def test_graph_runner_replays_equal_the_eager_static_passes(tiny_pair, fake_graphs):
    from decoding.lm.cuda_graphs import GraphRunner

    target = tiny_pair[0]
    graphed = StaticLM(target.model, target.device, target.vocab_size, graphs=GraphRunner(target.model, "cpu"))
    eager = StaticLM(target.model, target.device, target.vocab_size)
    seq = target.encode_prompt(PROMPT, chat=False)
    for lm in (graphed, eager):
        lm.extend(seq)
    for _ in range(5):
        a, b = graphed.extend(seq, [3, 4, 5]), eager.extend(seq, [3, 4, 5])
        assert torch.allclose(a, b, atol=1e-6)
        for lm in (graphed, eager):
            lm.rollback(len(seq))
        x = int(b[0].argmax())
        assert torch.allclose(graphed.forward([x]), eager.forward([x]), atol=1e-6)
        seq.append(x)
    assert {key[0] for key in graphed.graphs.graphs} == {(1, 3), (1, 1)}  # the prefill stayed eager
    assert sum(g.replays for g in fake_graphs) == 2 * 5 - 2  # each shape: eager once, then captured and replayed


@pytest.mark.parametrize("method,drafter", [("speculative", "model"), ("speculative", "feature"), ("ppd", None),
                                            ("mjsd", "model"), ("autoregressive", None)])
def test_runs_with_graphs_give_the_dynamic_tokens(tiny_pair, tiny_feature_dir, use_backend, fake_graphs, method,
                                                  drafter):
    target = tiny_pair[0]
    draft = _drafts(tiny_pair, tiny_feature_dir)[drafter] if drafter else None
    config = RunConfig(method=method, max_new_tokens=24, sampling=GREEDY, gamma=3, stop_at_eos=False)
    expected, _ = _run(target, draft, config, "dynamic")
    got, _ = _run(target, draft, config, "static")
    assert got == expected
    assert backend.describe(target.model)["backend"] == "static+cuda-graphs"
    assert any(g.replays for g in fake_graphs)


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "fake-graphs"])
@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "seeded-sampling"])
@pytest.mark.parametrize("drafter", ["model", "feature"])
def test_draft_trees_on_the_static_path_give_the_dynamic_tokens(tiny_pair, tiny_feature_dir, use_backend, request,
                                                                drafter, sampling, graphs):
    """A drafter's tree passes (lm/tree_pass.py) go through the static cache's own masked pass (its slots set, the
    mask padded to the buffer): the same tokens as on the dynamic cache, with graphs too (before, the draft's tree
    pass wrote at the last pass's stale slots and failed on the static path, the GPU's default)."""
    if graphs:
        request.getfixturevalue("fake_graphs")
    target = tiny_pair[0]
    draft = _drafts(tiny_pair, tiny_feature_dir)[drafter]
    config = RunConfig(method="speculative", max_new_tokens=24, sampling=sampling, gamma=4, stop_at_eos=False,
                       seed=7, extra={"draft_tree": "6,3", "gamma_schedule": "fixed"})
    expected, dynamic_records = _run(target, draft, config, "dynamic")
    got, records = _run(target, draft, config, "static")
    assert got == expected and len(got) == 24
    assert any(s.shape == "tree" and s.drafted > s.depth for s in map(TreeDraftStep.of, records))  # real branching
    drafting = draft.model if drafter == "model" else draft.feature  # the draft's LM ran on the static path too
    assert backend.describe(drafting)["backend"].startswith("static")
