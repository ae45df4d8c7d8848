"""The static cache's short passes through torch.compile (`decoding/lm/compiled_body.py`, SPECDEC_COMPILE=1),
on the CPU with tiny float32 models: the same greedy tokens as the dynamic cache, plain and speculative with
the feature draft (its layer compiles too), the run summary names it, and a compile that raises turns
compiling off with its reason instead of failing the run. Compiling needs inductor's C++ compiler here."""

import shutil

import pytest
import torch

from decoding.lm import backend, compiled_body
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="inductor needs a C++ compiler on the CPU")


@pytest.fixture
def compiling(monkeypatch):
    monkeypatch.setenv(compiled_body.ENV, "1")
    compiled_body.reset()
    yield
    backend.set_backend(None)
    compiled_body.reset()


def _tokens(target, draft, name, method):
    backend.set_backend(name)
    config = RunConfig(method=method, max_new_tokens=12, sampling=SamplingConfig(temperature=0.0), gamma=3,
                       stop_at_eos=False)
    ids = target.encode_prompt("hello world, the cat", chat=False)
    return [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]


@pytest.mark.parametrize("lean", ["1", "0"], ids=["lean-layer", "whole-body"])
def test_compiled_static_passes_give_the_dynamic_tokens(tiny_pair, tiny_feature_dir, compiling, monkeypatch, lean):
    """With the lean layer (`lean_layer.py`) its layer_step is compiled; without it, the whole body."""
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", lean)
    target = tiny_pair[0]
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    for method, draft in (("autoregressive", None), ("speculative", feature)):
        assert _tokens(target, draft, "static", method) == _tokens(target, draft, "dynamic", method)
    _tokens(target, None, "static", "autoregressive")
    assert compiled_body.failure() is None
    assert (compiled_body._state["layer"] is not None) == (lean == "1")
    assert (compiled_body._state["fn"] is not None) == (lean == "0")
    assert backend.describe(target.model) == {"backend": "static+compiled", "backend_note": None}


def test_a_compile_error_turns_compiling_off_and_says_why(tiny_pair, compiling, monkeypatch):
    target = tiny_pair[0]

    def broken(*args, **kwargs):
        raise RuntimeError("no backend here")

    monkeypatch.setattr(compiled_body, "_compiled", lambda: broken)  # the whole body (a model the lean layer misses)
    monkeypatch.setattr(compiled_body, "_compiled_layer", lambda: broken)  # the lean layer's step
    want = _tokens(target, None, "dynamic", "autoregressive")
    assert _tokens(target, None, "static", "autoregressive") == want
    assert "torch.compile of the static passes failed (RuntimeError: no backend here)" in compiled_body.failure()
    assert not compiled_body.wanted()
    described = backend.describe(target.model)
    assert described["backend"] == "static" and "no backend here" in described["backend_note"]


def test_unset_the_lean_step_compiles_on_cuda_only_and_the_switch_overrides(monkeypatch):
    """SPECDEC_COMPILE unset: compiled by default for the lean layer's step on CUDA, never on a CPU or ZeroGPU;
    "0" and "1" override the default either way."""
    monkeypatch.delenv("SPECDEC_COMPILE", raising=False)
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    compiled_body.reset()
    assert compiled_body.lean_default("cuda") and compiled_body.lean_default(torch.device("cuda", 1))
    assert not compiled_body.lean_default("cpu")
    assert compiled_body.wanted(compiled_body.lean_default("cuda"))
    assert not compiled_body.wanted(compiled_body.lean_default("cpu"))
    assert not compiled_body.wanted()  # HF's whole short pass: opt-in everywhere
    monkeypatch.setenv("SPECDEC_COMPILE", "0")
    assert not compiled_body.wanted(compiled_body.lean_default("cuda"))
    monkeypatch.setenv("SPECDEC_COMPILE", "1")
    assert compiled_body.wanted(compiled_body.lean_default("cpu")) and compiled_body.wanted()
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not compiled_body.wanted(True)
