"""Cross-run batching (decoding/batching.py): a batched pass equals solo passes, concurrent runs
with batching on give the tokens of runs one at a time, and errors reach the caller."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from decoding import batching
from decoding.cached_lm import CachedLM
from decoding.output_head import subset_head


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
    from decoding.models import load_model

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
    from decoding.models import load_model

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
    from decoding.models import load_model
    from decoding.runner import generate
    from decoding.strategies import RunConfig
    from decoding.warp import SamplingConfig

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
    from app.handlers import shared_note

    passes, calls = batching.sharing()
    assert calls == sum(size * count for size, count in shared.items()) and passes == sum(shared.values())
    note = shared_note((0, 0))  # since the batcher started: some passes served several runs
    assert (f"{calls / passes:.1f} runs each" in note) == (calls / passes >= 1.05)


def test_a_run_alone_gets_no_sharing_note(tiny_target_dir, batching_on):
    from app.handlers import shared_note
    from decoding.models import load_model
    from decoding.runner import generate
    from decoding.strategies import RunConfig

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    before = batching.sharing()
    generate(target, None, "a lone run", RunConfig(method="autoregressive", max_new_tokens=6))
    assert batching.sharing()[0] > before[0]  # its passes went through the batcher, one run each
    assert shared_note(before) == ""
    batching.disable()
    assert batching.sharing() == (0, 0) and shared_note(before) == ""


def test_a_failed_pass_reaches_its_caller_and_the_worker_goes_on(tiny_target_dir, batching_on):
    from decoding.models import load_model

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
    from decoding.models import load_model

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
    from decoding.models import load_model
    from decoding.runner import decode
    from decoding.strategies import RunConfig

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
