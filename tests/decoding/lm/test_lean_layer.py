"""The lean decoder layer of the static cache's short passes (`decoding/lm/lean_layer.py`), on the CPU in float32:
its logits equal HF's (the dynamic cache, a fresh pass) and today's static path (HF's modules with the short-pass
kernels) on tiny random Llamas with grouped-query attention and on the default target; it holds the model's
weights once; models it does not fit (biases, other architectures) run today's path; SPECDEC_LEAN_LAYER=0 turns
it off; and under SPECDEC_COMPILE=1 one compiled `layer_step` serves every layer of every model (graphs counted
with dynamo's counting backend, and once with inductor itself).

Tolerances: logits atol 2e-5, rtol 1e-5 against HF's path (logits reach about 13 here and only the
summation order of the fused matmuls and of the attention differs: measured 1.9e-5 at most on the tiny GQA
model); against today's static path, which runs the same attention and norm kernels, atol 1e-5. The default
target's logits (about 30 at most) get atol 1e-4 against HF's dynamic path."""

import shutil

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from decoding.lm import backend, compiled_body, lean_layer
from decoding.lm.cached_lm import CachedLM
from decoding.lm.static_lm import StaticLM, static_class
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode

CLOSE_HF = {"atol": 2e-5, "rtol": 1e-5}
CLOSE_STATIC = {"atol": 1e-5, "rtol": 1e-5}
CPU = torch.device("cpu")
IDS = [3 + (7 * i) % 90 for i in range(20)]


def _llama(layers: int = 3, hidden: int = 64, seed: int = 0, **overrides) -> LlamaForCausalLM:
    """A random float32 Llama, 4 query heads over 2 key/value heads, peaked logits."""
    config = LlamaConfig(vocab_size=100, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5, **overrides)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def _passes(lm) -> torch.Tensor:
    """A prefill, a 5-token verify pass, a step, a rollback and a 2-token pass: the logits of the short passes
    (8, vocab)."""
    lm.forward(IDS[:10])
    verify = lm.forward(IDS[10:15])
    step = lm.forward([7])
    lm.rollback(lm.length - 3)
    again = lm.forward([8, 9])
    return torch.cat([verify, step, again])


@pytest.fixture
def lean_calls(monkeypatch):
    """Counts lean_body's layer steps (the lean layer ran) and clears the read models afterwards."""
    calls = []
    real = lean_layer.lean_body

    def counted(lean, *args, step=lean_layer.layer_step, **kwargs):
        def counted_step(*a):
            calls.append(a[0].shape[0])
            return step(*a)

        return real(lean, *args, step=counted_step, **kwargs)

    monkeypatch.setattr(lean_layer, "lean_body", counted)
    yield calls


def _static(model, lean: str, monkeypatch) -> torch.Tensor:
    monkeypatch.setenv(lean_layer.ENV, lean)
    return _passes(StaticLM(model, CPU, 100))


def test_lean_logits_equal_hf_and_todays_static_path(monkeypatch, lean_calls):
    model = _llama()
    dynamic = _passes(CachedLM(model, CPU, 100))
    todays = _static(model, "0", monkeypatch)
    assert not lean_calls
    lean = _static(model, "1", monkeypatch)
    assert len(lean_calls) == 3 * 3  # three short passes after the prefill, three layers each
    assert torch.allclose(lean, dynamic, **CLOSE_HF)
    assert torch.allclose(lean, todays, **CLOSE_STATIC)
    with torch.inference_mode():  # the last pass against an uncached pass over the same sequence
        fresh = model(torch.tensor([IDS[:13] + [8, 9]])).logits[0, -2:].float()
    assert torch.allclose(lean[-2:], fresh, **CLOSE_HF)


def test_the_weights_are_held_once_and_the_hf_path_is_unchanged(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_LEAN_DYNAMIC", "0")  # HF's modules on the weights as loaded, before any re-pointing
    model = _llama()
    before = _passes(CachedLM(model, CPU, 100))
    storage = sum(p.untyped_storage().nbytes() for p in model.parameters())
    _static(model, "1", monkeypatch)
    lean = lean_layer.lean_model(model.get_decoder())
    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    qkv, gate_up = lean.layers[1].qkv, lean.layers[1].gate_up
    assert qkv.shape == (4 * 16 + 2 * 2 * 16, 64) and gate_up.shape == (2 * 128, 64)
    assert attn.q_proj.weight.data_ptr() == qkv.data_ptr()
    assert attn.v_proj.weight.data_ptr() == qkv[-32:].data_ptr()
    assert mlp.up_proj.weight.data_ptr() == gate_up[128:].data_ptr()
    padding = 2 * len(model.model.layers) * lean_layer.ALIGN  # each stacked tensor's room to keep the alignment
    assert sum({p.untyped_storage().data_ptr(): p.untyped_storage().nbytes()
                for p in model.parameters()}.values()) == storage + padding  # nothing held twice
    assert lean.kept_alignment
    assert torch.equal(_passes(CachedLM(model, CPU, 100)), before)
    assert lean_layer.lean_model(model.get_decoder()) is lean  # read once
    model.save_pretrained(tmp_path)  # the re-pointed projections still save and load as they were
    loaded = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    model.to(torch.float64)  # new weight tensors: read again
    again = lean_layer.lean_model(model.get_decoder())
    assert again is not lean and again.layers[0].qkv.dtype == torch.float64


@pytest.mark.parametrize("case,reason", [
    ("attention_bias", "its projections have biases"),
    ("mlp_bias", "its projections have biases"),
    ("qwen2", "its layers are Qwen2DecoderLayer"),
    ("gelu", "its MLP's activation is not SiLU"),
])
def test_models_it_does_not_fit_run_todays_path(monkeypatch, lean_calls, case, reason):
    if case == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2,
                                             initializer_range=0.5)).eval()
    else:
        model = _llama(**({"hidden_act": "gelu"} if case == "gelu" else {case: True}))
    assert reason in lean_layer.misfit(model.get_decoder())
    dynamic = _passes(CachedLM(model, CPU, 100))
    static = _static(model, "1", monkeypatch)
    assert not lean_calls
    assert lean_layer.lean_model(model.get_decoder()) is None
    assert torch.allclose(static, dynamic, atol=5e-5, rtol=1e-5)


def test_the_switch_keeps_hf_modules(monkeypatch, lean_calls):
    model = _llama()
    _static(model, "0", monkeypatch)
    assert not lean_calls
    _static(model, "1", monkeypatch)
    assert lean_calls


def test_the_feature_draft_layer_runs_lean(tiny_pair, tiny_feature_dir, monkeypatch, lean_calls):
    """The feature draft's layer (a StaticFeatureDraftLM: fc, then a 1-layer Llama body) goes through the lean
    layer too, with the target's features; its outputs equal the dynamic FeatureDraftLM's."""
    from decoding.drafters.feature import FeatureDraftLM
    from decoding.run.pair import load_draft_value

    target = tiny_pair[0]
    drafter = load_draft_value(str(tiny_feature_dir), target, "float32").drafter(target)
    model, width = drafter.model, 2 * drafter.model.config.hidden_size
    pairs = torch.randn(12, width, generator=torch.Generator().manual_seed(0))
    out = {}
    for name, cls in (("dynamic", FeatureDraftLM), ("static", static_class(FeatureDraftLM))):
        lm = cls(model, CPU)  # a new cache: the first pass runs HF's modules (it allocates the buffers)
        lm.forward(pairs[:6])
        out[name] = torch.cat([lm.forward(pairs[6:10]), lm.forward(pairs[10:11]), lm.forward(pairs[11:])])
    assert type(lm).__name__ == "StaticFeatureDraftLM" and len(lean_calls) == 3  # one layer, three short passes
    assert torch.allclose(out["static"], out["dynamic"], **CLOSE_HF)


@pytest.fixture
def counting_compile(monkeypatch):
    """SPECDEC_COMPILE=1 with dynamo's counting backend (no inductor): counts the graphs compiled."""
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    monkeypatch.setenv(compiled_body.ENV, "1")
    monkeypatch.setattr(compiled_body, "BACKEND", counter)
    compiled_body.reset()
    yield counter
    compiled_body.reset()


def test_one_compiled_layer_serves_every_layer_of_every_model(monkeypatch, counting_compile):
    """Regional compilation: a 6-layer model's one-token steps and longer passes compile layer_step twice (dynamo
    specialises a size of 1), and a 2-layer model of another width reuses both graphs."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv(lean_layer.ENV, "1")
    counters.clear()
    for model in (_llama(layers=6), _llama(layers=2, hidden=32, seed=1)):
        lm = StaticLM(model, CPU, 100)
        lm.forward(IDS[:10])
        for n in (1, 1, 3, 5, 1, 2, 4):
            lm.forward(IDS[:n])
        assert counting_compile.frame_count == 2, counting_compile.frame_count
    assert counters["stats"]["unique_graphs"] == 2
    assert compiled_body.failure() is None


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor needs a C++ compiler on the CPU")
def test_inductor_compiled_layer_gives_the_dynamic_tokens(monkeypatch):
    """The real compile (inductor) of layer_step on a 4-layer GQA model: greedy tokens of plain decoding equal
    the dynamic cache's, and the 4 layers share two compiled graphs (one-token steps, the prefill's rerun
    excluded since a first pass runs HF's modules)."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv(lean_layer.ENV, "1")
    monkeypatch.setenv(compiled_body.ENV, "1")
    compiled_body.reset()
    counters.clear()
    try:
        model = _llama(layers=4)
        tokens = {}
        for name in ("dynamic", "static"):
            lm = backend.make_lm(CachedLM, model, CPU, 100, backend=name)
            seq = list(IDS[:10])
            logits = lm.forward(seq)
            for _ in range(12):
                seq.append(int(logits[-1].argmax()))
                logits = lm.forward(seq[-1:])
            seq = seq[:-3]
            lm.rollback(len(seq) - 1)
            tokens[name] = seq + lm.forward(seq[-1:] + [5, 6]).argmax(-1).tolist()
        assert tokens["static"] == tokens["dynamic"]
        assert compiled_body.failure() is None
        assert counters["stats"]["unique_graphs"] <= 2  # one-token steps, and the 3-token pass
    finally:
        compiled_body.reset()


@pytest.mark.requires_embedded_target
def test_lean_logits_on_the_default_target(embedded_target, monkeypatch):
    """SmolLM2-135M-Instruct in float32 (30 layers, 9 query / 3 key-value heads): a verify pass and a step on the
    lean layer against HF's dynamic path and today's static path."""
    target = embedded_target
    ids = target.encode_prompt("Explain why the sky is blue in two sentences.", chat=True)
    extra = [ids[-1], 42, 1337, 7, 99]

    def passes(lm):
        lm.forward(ids)
        return torch.cat([lm.forward(extra), lm.forward([ids[-2]])])

    out = {"dynamic": passes(CachedLM(target.model, CPU, target.vocab_size))}
    for lean in ("0", "1"):
        monkeypatch.setenv(lean_layer.ENV, lean)
        out[lean] = passes(StaticLM(target.model, CPU, target.vocab_size))
    assert lean_layer.lean_model(target.model.get_decoder()) is not None
    assert torch.allclose(out["1"], out["dynamic"], atol=1e-4, rtol=1e-5)
    assert torch.allclose(out["1"], out["0"], atol=1e-4, rtol=1e-5)
    assert torch.equal(out["1"].argmax(-1), out["dynamic"].argmax(-1))


def test_the_lean_layer_is_on_by_default_on_cpus_and_cuda_only(monkeypatch):
    """SPECDEC_LEAN_LAYER unset: on for CPUs and CUDA GPUs (both measured faster), off elsewhere; "0" turns it off."""
    monkeypatch.delenv("SPECDEC_LEAN_LAYER", raising=False)
    assert lean_layer.enabled("cpu") and lean_layer.enabled("cuda") and not lean_layer.enabled("meta")
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", "0")
    assert not lean_layer.enabled("cpu") and not lean_layer.enabled("cuda")
