"""How model calls name the KV cache (`decoding/lm/hf_cache.py`): the name the installed transformers declares,
so no decoding path passes or reads a name the library warns about (and has announced it will drop), and the
older name where a model's forward takes only that."""

import dataclasses
import inspect
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers.utils import generic

from decoding.lm import batching, hf_cache, lean_dynamic
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

PROMPT = "hello world, the cat sat on the mat, the cat sat on the"


class _OldStyle(torch.nn.Module):
    """A model as transformers wrote them before the rename: forward takes past_key_values."""

    def forward(self, input_ids=None, past_key_values=None, use_cache=None):
        return input_ids


@dataclasses.dataclass
class _OldOutput:
    past_key_values: object = None


@dataclasses.dataclass
class _NewOutput:
    cache: object = None


def test_the_name_follows_each_models_own_forward(tiny_pair):
    target = tiny_pair[0].model
    declared = "cache" if "cache" in inspect.signature(target.forward).parameters else "past_key_values"
    assert hf_cache.cache_argument(target) == declared
    assert hf_cache.cache_argument(_OldStyle()) == "past_key_values"
    assert hf_cache.cache_kwargs(_OldStyle(), 7) == {"past_key_values": 7}
    assert hf_cache.grown_cache(_OldOutput(past_key_values=3)) == 3
    assert hf_cache.grown_cache(_NewOutput(cache=4)) == 4


def test_a_call_through_it_grows_the_cache_it_was_given(tiny_pair):
    from transformers import DynamicCache

    model = tiny_pair[0].model
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        out = model(torch.tensor([[5, 6, 7]]), **hf_cache.cache_kwargs(model, cache), use_cache=True)
    assert hf_cache.grown_cache(out) is cache and cache.get_seq_length() == 3


@pytest.fixture
def deprecations(monkeypatch):
    """Every warning about the cache's old name while the test runs: the call's FutureWarning (each call, not
    once per place) and the output field's logger.warning_once (patched, as it logs once per process)."""
    logged = []
    monkeypatch.setattr(generic.logger, "warning_once", lambda message, *a, **k: logged.append(str(message)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield lambda: [m for m in logged + [str(w.message) for w in caught]
                       if "past_key_values" in m or "cache_params" in m]


@pytest.mark.parametrize("lean", ["0", "1"])
def test_no_method_passes_or_reads_the_old_name(tiny_pair, tiny_feature_dir, deprecations, monkeypatch, lean):
    """Every method, the feature draft's chains and trees, alone and batched across runs, with HF's modules
    (SPECDEC_LEAN_DYNAMIC=0) and with the lean path (long prefills still run HF's modules)."""
    monkeypatch.setenv(lean_dynamic.ENV, lean)
    target, draft = tiny_pair
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    ids = target.encode_prompt(PROMPT, chat=False)
    greedy, warm = SamplingConfig(temperature=0.0), SamplingConfig(temperature=0.8)
    runs = [("autoregressive", None, {}), ("speculative", draft, {}), ("speculative", feature.hybrid(), {}),
            ("speculative", feature, {"draft_tree": "4,2"}), ("mentored", draft, {}), ("mjsd", draft, {}),
            ("ppd", None, {})]
    for method, d, extra in runs:
        for sampling in (greedy, warm):
            config = RunConfig(method=method, max_new_tokens=8, sampling=sampling, gamma=3, stop_at_eos=False,
                               extra=dict(extra))
            assert sum(len(r.emitted) for r in decode(target, d, ids, config)) == 8
    batching.enable(max_batch=4, window_s=0.02)
    try:
        config = RunConfig(method="speculative", max_new_tokens=8, sampling=greedy, gamma=3, stop_at_eos=False)
        with ThreadPoolExecutor(3) as pool:
            runs = list(pool.map(lambda d: list(decode(target, d, ids, config)), [draft, feature, feature.hybrid()]))
    finally:
        batching.disable()
    assert all(sum(len(r.emitted) for r in records) == 8 for records in runs)
    assert deprecations() == []
