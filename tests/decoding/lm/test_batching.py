"""Cross-run batching (decoding/lm/batching.py): a batched pass equals solo passes, concurrent runs
with batching on give the tokens of runs one at a time, and errors reach the caller."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from decoding.lm import batching
from decoding.lm.cached_lm import CachedLM
from decoding.drafters.output_head import subset_head


@pytest.fixture
def batching_on():
    batching.enable(max_batch=8, window_s=0.02)
    yield
    batching.disable()


def _lm(model, prompt, head=None):
    lm = CachedLM(model.model, model.device, model.vocab_size, head)
    lm.forward_alone(prompt)
    return lm


def _caches_equal(a, b):
    return all(torch.allclose(x.keys, y.keys, atol=1e-4) and torch.allclose(x.values, y.values, atol=1e-4)
               for x, y in zip(a.cache.layers, b.cache.layers))


@pytest.mark.parametrize("with_head", [False, True])
def test_a_batched_pass_equals_each_run_alone(tiny_target_dir, with_head):
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    head = subset_head(target.model, list(range(0, target.vocab_size, 2))) if with_head else None
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]  # three cache lengths
    batched = [_lm(target, p, head) for p in prompts]
    alone = [_lm(target, p, head) for p in prompts]
    for calls in ([[20], [21, 22, 23], [24, 25]], [[26, 27], [28], [29, 30, 31, 32]]):
        keeps = [None, 2, 1]
        got = batching.batched_forward(target.model, [batching.Call(lm, t, k) for lm, t, k in zip(batched, calls, keeps)])
        want = [lm.forward_alone(t, k) for lm, t, k in zip(alone, calls, keeps)]
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == torch.float32
            finite = torch.isfinite(w)
            assert torch.equal(finite, torch.isfinite(g))
            assert torch.allclose(g[finite], w[finite], atol=1e-4)
        for b, a in zip(batched, alone):
            assert (b.length, b.calls) == (a.length, a.calls)
            assert _caches_equal(b, a)
        batched[1].rollback(batched[1].length - 2)  # a rejection between passes, as speculative decoding does
        alone[1].rollback(alone[1].length - 2)


def test_prefills_batch_together_even_beside_a_filled_cache(tiny_target_dir):
    """Long calls are batched with long calls: empty caches of different prompt lengths, and one run
    whose cache is already filled, in one pass."""
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    fresh = lambda: CachedLM(target.model, target.device, target.vocab_size)  # noqa: E731
    batched = [fresh(), fresh(), _lm(target, [5, 6, 7, 8])]
    alone = [fresh(), fresh(), _lm(target, [5, 6, 7, 8])]
    tokens = [list(range(3, 3 + n)) for n in (batching.LONG_CALL + 3, 6, batching.LONG_CALL + 1)]
    keeps = [1, None, 3]
    got = batching.batched_forward(target.model, [batching.Call(lm, t, k) for lm, t, k in zip(batched, tokens, keeps)])
    want = [lm.forward_alone(t, k) for lm, t, k in zip(alone, tokens, keeps)]
    for g, w in zip(got, want):
        assert g.shape == w.shape and torch.allclose(g, w, atol=1e-4)
    for b, a in zip(batched, alone):
        assert b.length == a.length and _caches_equal(b, a)
    assert torch.allclose(batched[0].forward_alone([9]), alone[0].forward_alone([9]), atol=1e-4)


def test_concurrent_runs_with_batching_give_the_tokens_of_runs_one_at_a_time(tiny_target_dir, tiny_draft_dir,
                                                                              batching_on):
    from decoding.lm.models import load_model
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    target, draft = load_model(str(tiny_target_dir), device="cpu", dtype="float32"), load_model(str(tiny_draft_dir))
    jobs = [(method, f"prompt {i} is", i, temperature) for i in range(3) for temperature in (0.0, 0.8)
            for method in ("speculative", "autoregressive", "mjsd")]

    def run(job):
        method, prompt, seed, temperature = job
        config = RunConfig(method=method, max_new_tokens=12, sampling=SamplingConfig(temperature=temperature),
                           seed=seed, gamma=3)
        return generate(target, draft, prompt, config)[1].token_ids

    batching.disable()
    alone = [run(job) for job in jobs]
    batching.enable(max_batch=8, window_s=0.02)
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(run, jobs))
    assert together == alone
    shared = batching.batcher().batch_sizes
    assert max(shared) > 1, f"no pass served more than one run: {shared}"
    from app.explainer.handlers import shared_note

    passes, calls = batching.sharing()
    assert calls == sum(size * count for size, count in shared.items()) and passes == sum(shared.values())
    note = shared_note((0, 0))  # since the batcher started: some passes served several runs
    assert (f"{calls / passes:.1f} runs each" in note) == (calls / passes >= 1.05)


def test_a_run_alone_gets_no_sharing_note(tiny_target_dir, batching_on):
    from app.explainer.handlers import shared_note
    from decoding.lm.models import load_model
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    before = batching.sharing()
    generate(target, None, "a lone run", RunConfig(method="autoregressive", max_new_tokens=6))
    assert batching.sharing()[0] > before[0]  # its passes went through the batcher, one run each
    assert shared_note(before) == ""
    batching.disable()
    assert batching.sharing() == (0, 0) and shared_note(before) == ""


def test_a_batched_pass_keeps_each_runs_hidden_states(tiny_target_dir):
    """Runs whose target keeps its hidden states (a feature draft reads them) batch with each other
    and with runs that keep none: each stores exactly the rows of its own tokens, as alone."""
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]

    def lms(keeping):
        out = []
        for prompt, keep in zip(prompts, keeping):
            lm = CachedLM(target.model, target.device, target.vocab_size)
            if keep:
                lm.keep_features()
            lm.forward_alone(prompt)
            out.append(lm)
        return out

    batched, alone = lms((True, False, True)), lms((True, False, True))
    for calls in ([[20], [21, 22, 23], [24, 25]], [[26, 27], [28], [29, 30, 31, 32]]):
        keeps = [None, 2, 1]
        got = batching.batched_forward(target.model,
                                       [batching.Call(lm, t, k) for lm, t, k in zip(batched, calls, keeps)])
        want = [lm.forward_alone(t, k) for lm, t, k in zip(alone, calls, keeps)]
        for g, w in zip(got, want):
            assert g.shape == w.shape and torch.allclose(g, w, atol=1e-4)
        for b, a in zip(batched, alone):
            assert (b.length, b.calls) == (a.length, a.calls) and _caches_equal(b, a)
            assert (b.features is None) == (a.features is None)
            if b.features is not None:
                assert torch.allclose(b.features[: b.length], a.features[: a.length], atol=1e-4)
        for lm in (batched[0], alone[0]):
            lm.rollback(lm.length - 1)  # a rejection: the next pass overwrites the dropped row
    with torch.inference_mode():
        fresh = target.model.get_decoder()(input_ids=torch.tensor([prompts[0] + [26]])).last_hidden_state[0]
    assert torch.allclose(batched[0].features[: batched[0].length], fresh, atol=1e-4)


def test_a_batched_pass_of_the_feature_draft_layer_equals_each_run_alone(tiny_target_dir, tiny_feature_dir):
    """The feature draft's own layer (fed [feature; embedding] vectors, returning predicted
    features) batches across runs: each run's predictions and cache are those of its solo passes."""
    from decoding.drafters.feature import FeatureDraftLM
    from decoding.lm.models import load_model
    from decoding.run.pair import load_draft_value

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    layer = load_draft_value(str(tiny_feature_dir), target, "float32").feature
    width = 2 * target.model.config.hidden_size
    generator = torch.Generator().manual_seed(0)
    pairs = lambda n: torch.randn(n, width, generator=generator)  # noqa: E731
    firsts = [pairs(n) for n in (3, 6, 4)]
    batched = [FeatureDraftLM(layer, target.device) for _ in firsts]
    alone = [FeatureDraftLM(layer, target.device) for _ in firsts]
    for b, a, first in zip(batched, alone, firsts):
        b.forward_alone(first)
        a.forward_alone(first)
    for step in ([pairs(1), pairs(2), pairs(1)], [pairs(2), pairs(1), pairs(3)]):
        got = batching.batched_forward(layer, [batching.Call(lm, x, 1) for lm, x in zip(batched, step)])
        want = [lm.forward_alone(x, 1) for lm, x in zip(alone, step)]
        for g, w in zip(got, want):
            assert g.shape == w.shape == (1, target.model.config.hidden_size)
            assert torch.allclose(g, w, atol=1e-4)
        for b, a in zip(batched, alone):
            assert b.length == a.length and _caches_equal(b, a)
        batched[2].rollback(batched[2].length - 1)
        alone[2].rollback(alone[2].length - 1)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_concurrent_runs_with_a_feature_draft_share_passes_and_keep_their_tokens(tiny_target_dir, tiny_feature_dir,
                                                                                 temperature, batching_on,
                                                                                 monkeypatch):
    """The app's default kind of pair (the hybrid with a feature draft, and the feature draft alone):
    concurrent float32 runs with batching on give the tokens of runs one at a time, and passes of
    the target and of the feature draft's layer each served several runs."""
    from decoding.lm.models import load_model
    from decoding.run.pair import load_draft_value
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    drafts = {"feature": feature, "hybrid": feature.hybrid()}
    jobs = [(draft, f"the cat {i} sat on the mat, the cat", i) for i in range(3) for draft in drafts]

    def run(job):
        draft, prompt, seed = job
        config = RunConfig(method="speculative", max_new_tokens=14, sampling=SamplingConfig(temperature=temperature),
                           seed=seed, gamma=3)
        return generate(target, drafts[draft], prompt, config)[1].token_ids

    batching.disable()
    alone = [run(job) for job in jobs]
    served = []
    real = batching.batched_forward

    def counted(model, calls):
        served.append((type(model).__name__, len(calls)))
        return real(model, calls)

    monkeypatch.setattr(batching, "batched_forward", counted)
    batching.enable(max_batch=8, window_s=0.05)
    with ThreadPoolExecutor(len(jobs)) as pool:
        together = list(pool.map(run, jobs))
    assert together == alone
    shared = {name: max(size for n, size in served if n == name) for name, _ in served}
    assert shared.get("LlamaForCausalLM", 0) > 1, f"no target pass served several runs: {served}"
    assert shared.get("FeatureDraftModel", 0) > 1, f"no feature-draft pass served several runs: {served}"


def test_a_failed_pass_reaches_its_caller_and_the_worker_goes_on(tiny_target_dir, batching_on):
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    lm = CachedLM(target.model, target.device, target.vocab_size)
    passes = batching.batcher().passes
    lm.forward(list(range(5, 5 + batching.LONG_CALL + 4)))
    assert batching.batcher().passes == passes + 1  # served by the worker
    with pytest.raises(Exception):
        lm.forward([10 ** 9])  # an id beyond the embedding: the worker's error is raised here
    assert lm.forward([7]).shape == (1, target.vocab_size)  # the worker still serves


def test_a_model_that_refuses_the_batched_pass_runs_its_calls_alone(tiny_target_dir, batching_on, monkeypatch):
    """A model whose caches cannot be padded (e.g. sliding-window layers) keeps working: the
    worker runs each call alone, and the caches are those of solo passes."""
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    calls = [batching.Call(_lm(target, [5, 6, 7]), [8], None), batching.Call(_lm(target, [9, 10]), [11, 12], None)]
    monkeypatch.setattr(calls[1].lm.cache.layers[0], "is_sliding", True, raising=False)
    with pytest.raises(batching.NotBatchable):
        batching.batched_forward(target.model, calls)
    assert [c.lm.length for c in calls] == [3, 2]  # untouched
    monkeypatch.setattr(batching, "_pass", lambda model, calls: 1 / 0)
    lms = [_lm(target, [5, 6, 7]), _lm(target, [9, 10])]
    alone = [_lm(target, [5, 6, 7]), _lm(target, [9, 10])]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda pair: pair[0].forward(pair[1]), zip(lms, ([8], [11, 12]))))
    for g, lm, tokens in zip(got, alone, ([8], [11, 12])):
        assert torch.allclose(g, lm.forward_alone(tokens), atol=1e-5)


def test_enable_refuses_bad_settings():
    with pytest.raises(ValueError):
        batching.enable(max_batch=0)
    assert batching.batcher() is None  # off by default


def test_a_paused_run_is_not_waited_for(tiny_target_dir, batching_on):
    """A run paused between records for longer than the window (a Step run waiting for its next
    click) is not waited for: it must not make every pass wait out the window."""
    from decoding.lm.models import load_model
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    seen = []
    real_forward = batching.ForwardBatcher.forward

    def forward(self, lm, tokens, keep):
        seen.append(batching._running(time.monotonic()))  # while computing, the run counts
        return real_forward(self, lm, tokens, keep)

    batching.ForwardBatcher.forward = forward
    try:
        records = decode(target, None, target.encode_prompt("a paused run", False),
                         RunConfig(method="autoregressive", max_new_tokens=5))
        next(records)
        assert seen and set(seen) == {1}
        assert batching._running(time.monotonic()) == 1  # just paused: a continuing run calls again soon
        assert batching._running(time.monotonic() + 2 * batching._settings["window_s"]) == 0  # a Step run's pause
        records.close()
        assert batching._runs == {}
    finally:
        batching.ForwardBatcher.forward = real_forward
