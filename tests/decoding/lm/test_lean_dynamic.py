"""The dynamic path's lean decoder (`decoding/lm/lean_dynamic.py`, on unless SPECDEC_LEAN_DYNAMIC=0): its logits are
bit-identical (torch.equal, no tolerance) to HF's modules on the dynamic cache for every kind of pass (steps, verify
passes, tree passes, passes after rollback and compaction; short prefills), in float32 and bfloat16 (where the
split attention kernel runs), on tiny random Llamas with grouped-query attention and on the default target; every
method gives the same tokens with it on and off (greedy and seeded sampling, draft trees, PPD); the cross-run
batcher's merged passes run it too, bit-identical to HF's batched passes; it is on by default,
SPECDEC_LEAN_DYNAMIC=0 turns it off, and long passes and other models keep HF's modules."""

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from decoding.lm import batching, lean_dynamic, lean_layer
from decoding.lm.cached_lm import CachedLM
from decoding.lm.models.attention import use_fast_cpu_attention
from decoding.lm.tree_pass import compact, tree_pass
from decoding.methods.base import RunConfig
from decoding.methods.ppd.engine import lm_tree_forward
from decoding.methods.ppd.prompts import untrained_prompt_tokens
from decoding.methods.ppd.tree import dynamic_trees, tree_buffers
from decoding.methods.registry import METHODS
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

CPU = torch.device("cpu")
IDS = [3 + (7 * i) % 90 for i in range(80)]
PROMPT = "hello world, the cat"
GREEDY = SamplingConfig(temperature=0.0)
SAMPLED = SamplingConfig(temperature=0.8, top_k=20)


def _llama(dtype=torch.float32, **overrides) -> LlamaForCausalLM:
    """A random 3-layer Llama, 4 query heads over 2 key/value heads, peaked logits, in `dtype`; in half precision
    with the loader's split attention kernel (`models/attention.py`), as a loaded CPU model has it."""
    config = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5, **overrides)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval().to(dtype)
    use_fast_cpu_attention(model)
    return model


@pytest.fixture
def lean_on(monkeypatch):
    """Sets SPECDEC_LEAN_DYNAMIC ("1" / "0") and counts the passes that went through lean_dynamic.body."""
    calls = []
    real = lean_dynamic.body

    def counted(lean, decoder, hidden, *args, **kwargs):
        calls.append(hidden.shape[1])
        return real(lean, decoder, hidden, *args, **kwargs)

    monkeypatch.setattr(lean_dynamic, "body", counted)

    def switch(value: str):
        monkeypatch.setenv(lean_dynamic.ENV, value)
        return calls

    yield switch


def _tree_mask(length: int) -> torch.Tensor:
    """A 4-node tree after `length` cached tokens: root, two children of the root, a child of the second: (4, L+4)."""
    tree = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    return torch.cat([torch.ones(4, length, dtype=torch.bool), tree], 1)


def _passes(lm, prefill: int) -> list[torch.Tensor]:
    """A prefill of `prefill` tokens, a 5-token verify pass, a step, a rollback and a 2-token pass, a pass keeping
    its last row, a drafter's tree pass and its compaction, PPD's kind of tree pass (CachedLM.tree_pass, keeping
    2 rows), and passes after them: every output."""
    out = [lm.forward(IDS[:prefill]), lm.forward(IDS[prefill:prefill + 5]), lm.forward([7])]
    lm.rollback(lm.length - 3)
    out += [lm.forward([8, 9]), lm.forward(IDS[:9], keep=1)]
    length = lm.length
    out.append(tree_pass(lm, [11, 12, 13, 14], [length, length + 1, length + 1, length + 2], _tree_mask(length)))
    compact(lm, length, [length, length + 2, length + 3])
    out.append(lm.forward([5, 6, 7]))
    length = lm.length
    embeds = lm.model.get_input_embeddings()(torch.tensor([[21, 22, 23, 24]]))
    positions = torch.tensor([[length, length + 1, length + 1, length + 2]])
    with torch.inference_mode():
        out.append(lm.tree_pass(embeds, positions, _tree_mask(length)[None, None], keep=2))
    compact(lm, length, [length, length + 1])
    out += [lm.forward([9]), lm.forward(IDS[20:29])]
    return out


@pytest.mark.parametrize("prefill", [10, 70], ids=["short-prefill", "long-prefill"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_every_pass_is_bit_identical_to_hf_modules(lean_on, dtype, prefill):
    """Against a copy of the model that never ran the lean path (its q/k/v and gate/up weights are HF's own
    tensors, not views of the fused ones); a prefill of more than MAX_TOKENS tokens runs HF's modules."""
    model = _llama(dtype)
    untouched = copy.deepcopy(model)
    calls = lean_on("0")
    want = _passes(CachedLM(untouched, CPU, 100), prefill)
    assert not calls
    lean_on("1")
    got = _passes(CachedLM(model, CPU, 100), prefill)
    assert calls == ([10] if prefill == 10 else []) + [5, 1, 2, 9, 4, 3, 4, 1, 9]
    assert all(torch.equal(a, b) for a, b in zip(got, want)), [float((a - b).abs().max()) for a, b in zip(got, want)]
    assert all(a.dtype == torch.float32 for a in got)
    lean_on("0")  # HF's modules on the re-pointed weights: the same logits too
    assert all(torch.equal(a, b) for a, b in zip(_passes(CachedLM(model, CPU, 100), prefill), want))


def test_the_attention_function_gets_hfs_inputs(lean_on):
    """The split kernel (a bfloat16 CPU model's attention function) sees the same query/key/value shapes and strides,
    the same mask and the same keyword arguments from the lean path as from HF's modules."""
    from transformers import AttentionInterface

    from decoding.lm.models import attention

    model = _llama(torch.bfloat16)
    seen = []

    def spy(module, q, k, v, mask, **kwargs):
        seen.append((q.shape, q.stride(), k.shape, k.stride(), v.stride(),
                     None if mask is None else (mask.dtype, mask.shape, mask.stride()), sorted(kwargs)))
        return attention.split_attention(module, q, k, v, mask, **kwargs)

    AttentionInterface.register(attention.NAME, spy)
    try:
        got = {}
        for flag in ("0", "1"):
            lean_on(flag)
            seen.clear()
            lm = CachedLM(model, CPU, 100)
            lm.forward(IDS[:10]), lm.forward(IDS[10:15]), lm.forward([7])
            length = lm.length
            tree_pass(lm, [11, 12, 13, 14], [length, length + 1, length + 1, length + 2], _tree_mask(length))
            got[flag] = list(seen)
    finally:
        AttentionInterface.register(attention.NAME, attention.split_attention)
    assert len(got["1"]) == 4 * 3 and got["1"] == got["0"]


def _placed(model, offsets: dict) -> LlamaForCausalLM:
    """`model` with each projection weight copied to `offsets[name]` bytes past a 64-byte boundary (name: q_proj...;
    absent: 8), as a checkpoint's float32 weights lie (the default target's at 40 mod 64)."""
    for layer in model.model.layers:
        for module in (layer.self_attn, layer.mlp):
            for name, linear in module.named_children():
                if name.endswith("_proj"):
                    weight = linear.weight.detach()
                    size = weight.element_size()
                    buffer = torch.empty(weight.numel() + 128 // size, dtype=weight.dtype)
                    start = ((-buffer.data_ptr()) % 64 + offsets.get(name, 8)) // size
                    linear.weight.data = buffer[start: start + weight.numel()].view(weight.shape).copy_(weight)
    return model


def test_weights_off_a_16_byte_boundary_stay_bit_identical(lean_on):
    """On this CPU a float32 one-row matmul rounds differently on a weight at 8 mod 16 bytes than on an aligned copy:
    the fused weights keep the old address modulo 64 (lean_layer._stacked), so steps stay bit-identical; where the
    projections could not keep theirs (k_proj at another offset than q_proj), the lean path refuses (HF's modules)."""
    model, untouched = _placed(_llama(), {}), _placed(_llama(), {})
    calls = lean_on("0")
    want = _passes(CachedLM(untouched, CPU, 100), 10)
    lean_on("1")
    got = _passes(CachedLM(model, CPU, 100), 10)
    assert len(calls) == 10 and lean_layer.lean_model(model.get_decoder()).kept_alignment
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert model.model.layers[0].self_attn.k_proj.weight.data_ptr() % 64 == 8
    mixed = _placed(_llama(), {"k_proj": 0})
    k_proj = mixed.model.layers[0].self_attn.k_proj.weight.data_ptr()
    calls.clear()
    _passes(CachedLM(mixed, CPU, 100), 10)
    assert not calls and lean_layer.lean_model(mixed.get_decoder(), exact=True) is None
    assert mixed.model.layers[0].self_attn.k_proj.weight.data_ptr() == k_proj  # nothing was moved
    assert not lean_layer.lean_model(mixed.get_decoder()).kept_alignment  # the static path reads it all the same
    assert lean_dynamic.usable(mixed.get_decoder(), CPU, 1) is None


def test_on_by_default_off_with_0_and_cpu_llamas_only(lean_on, monkeypatch):
    monkeypatch.delenv(lean_dynamic.ENV, raising=False)
    assert lean_dynamic.enabled()
    model = _llama()
    lm = CachedLM(model, CPU, 100)
    calls = lean_on("1")
    monkeypatch.delenv(lean_dynamic.ENV)
    lm.forward(IDS[:10])
    assert calls == [10]  # unset: on
    for off in ("0", "off", "false"):
        lean_on(off)
        lm.forward([4])
    assert calls == [10]
    lean_on("1")
    decoder = model.get_decoder()
    assert lean_dynamic.usable(decoder, CPU, 64) is not None
    assert lean_dynamic.usable(decoder, CPU, 65) is None
    assert lean_dynamic.usable(decoder, torch.device("cuda"), 1) is None


def test_models_it_does_not_fit_keep_hf_modules(lean_on):
    """A Llama with attention biases (lean_layer.misfit) and a Qwen2 (another decoder class): HF's modules."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2)).eval()
    for model in (_llama(attention_bias=True), qwen):
        want = [CachedLM(model, CPU, 100).forward(IDS[:12])]
        calls = lean_on("1")
        lm = CachedLM(model, CPU, 100)
        assert torch.equal(lm.forward(IDS[:12]), want[0])
        lm.forward([5])
        assert not calls
    assert lean_dynamic.usable(qwen.get_decoder(), CPU, 1) is None  # refused by its decoder class


def test_the_feature_draft_layer_is_bit_identical(tiny_pair, tiny_feature_dir, lean_on):
    """The feature draft's FeatureDraftLM (fc over [feature ; embedding], then a 1-layer Llama body, returning
    hidden states): the same outputs bit for bit."""
    from decoding.drafters.feature import FeatureDraftLM

    target = tiny_pair[0]
    model = load_draft_value(str(tiny_feature_dir), target, "float32").drafter(target).model
    pairs = torch.randn(12, 2 * model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    out = {}
    for flag in ("0", "1"):
        calls = lean_on(flag)
        lm = FeatureDraftLM(model, CPU)
        out[flag] = [lm.forward(pairs[:6]), lm.forward(pairs[6:10]), lm.forward(pairs[10:11])]
        lm.rollback(7)
        out[flag].append(lm.forward(pairs[7:]))
    assert calls == [6, 4, 1, 5]
    assert all(torch.equal(a, b) for a, b in zip(out["1"], out["0"]))


def _tokens(target, draft, config) -> list[int]:
    ids = target.encode_prompt(PROMPT, chat=False)
    return [t.token_id for r in decode(target, draft, ids, config) for t in r.emitted]


def _cases():
    """(method, drafter kind, tree) for every method in the registry, each drafter for a drafting method, and
    draft trees for the model and feature drafters."""
    for name, spec in METHODS.items():
        if not spec.uses_drafter:
            yield name, None, None
        elif spec.needs_draft_model:
            yield name, "model", None
        else:
            yield from ((name, kind, None) for kind in ("model", "feature", "hybrid", "prompt-lookup"))
    yield from (("speculative", kind, "6,3") for kind in ("model", "feature"))


def _draft(kind, pair, feature_dir, dtype):
    target, draft = pair
    if kind == "feature" or kind == "hybrid":
        feature = load_draft_value(str(feature_dir), target, dtype)
        return feature.hybrid() if kind == "hybrid" else feature
    return {"model": draft, "prompt-lookup": "prompt-lookup", None: None}[kind]


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "seeded-sampling"])
@pytest.mark.parametrize("method,drafter,tree", list(_cases()))
def test_every_method_gives_the_same_tokens(tiny_pair, tiny_feature_dir, lean_on, method, drafter, tree, sampling):
    target = tiny_pair[0]
    draft = _draft(drafter, tiny_pair, tiny_feature_dir, "float32")
    extra = {"draft_tree": tree, "gamma_schedule": "fixed"} if tree else {}
    config = RunConfig(method=method, max_new_tokens=24, sampling=sampling, gamma=3, stop_at_eos=False, seed=7,
                       extra=extra)
    lean_on("0")
    want = _tokens(target, draft, config)
    calls = lean_on("1")
    assert _tokens(target, draft, config) == want and len(want) == 24
    assert calls


@pytest.fixture(scope="module")
def bf16_pair(tiny_target_dir, tiny_draft_dir):
    from decoding.lm.models import load_model

    return (load_model(str(tiny_target_dir), device="cpu", dtype="bfloat16"),
            load_model(str(tiny_draft_dir), device="cpu", dtype="bfloat16"))


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "seeded-sampling"])
@pytest.mark.parametrize("method,drafter,tree", [("autoregressive", None, None), ("speculative", "model", None),
                                                 ("speculative", "hybrid", None), ("speculative", "feature", "6,3"),
                                                 ("ppd", None, None)])
def test_bfloat16_runs_give_the_same_tokens(bf16_pair, tiny_feature_dir, lean_on, method, drafter, tree, sampling):
    """The tiny pair loaded in bfloat16 (the loader gives it the split attention kernel)."""
    target = bf16_pair[0]
    assert target.model.config._attn_implementation != "sdpa"  # the split kernel
    draft = _draft(drafter, bf16_pair, tiny_feature_dir, "bfloat16")
    extra = {"draft_tree": tree, "gamma_schedule": "fixed"} if tree else {}
    config = RunConfig(method=method, max_new_tokens=24, sampling=sampling, gamma=3, stop_at_eos=False, seed=7,
                       extra=extra)
    lean_on("0")
    want = _tokens(target, draft, config)
    calls = lean_on("1")
    assert _tokens(target, draft, config) == want and len(want) == 24
    assert calls


def test_ppd_tree_pass_and_compaction(tiny_pair, lean_on):
    """PPD's tree pass (lm_tree_forward, with its prompt tokens' embeddings) and the next step after compaction."""
    target = tiny_pair[0]
    ids = target.encode_prompt(PROMPT, chat=False)
    prompts = untrained_prompt_tokens(target)
    buffers = tree_buffers(dynamic_trees(6, prompts.m, prompts.ept).trees[1], prefix_length=len(ids) - 1,
                           ept=prompts.ept)
    tree_ids = [ids[-1]] + [4 + i for i in range(buffers.n_candidates)]
    out = {}
    for flag in ("0", "1"):
        calls = lean_on(flag)
        lm = CachedLM(target.model, target.device, target.vocab_size)
        lm.extend(ids[:-2])
        logits = lm_tree_forward(lm, [ids[-2]], tree_ids, buffers, prompts)
        lm.compact(len(ids) - 1, [len(ids) - 1, len(ids)])
        out[flag] = (logits, lm.extend(ids + [tree_ids[1]], [7]))
    assert calls
    assert torch.equal(out["1"][0], out["0"][0]) and torch.equal(out["1"][1], out["0"][1])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", ["logits", "features"])
def test_batched_passes_are_bit_identical(tiny_target_dir, lean_on, dtype, kind):
    """Three runs' passes merged by the cross-run batcher (`batching.batched_forward`: caches of three lengths
    padded into one, a 4D mask) run lean_dynamic.body on the merged cache, with HF's batched outputs bit for bit:
    a target's logits ("logits"), or a target that keeps its hidden states for a feature draft ("features"); a
    batched prefill longer than MAX_TOKENS keeps HF's modules; each run's next pass alone is bit-identical too."""
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype=dtype)
    out = {}
    for flag in ("0", "1"):
        calls = lean_on(flag)
        lms = [CachedLM(target.model, target.device, target.vocab_size) for _ in range(3)]
        for lm in lms if kind == "features" else ():
            lm.keep_features()
        long = [[3 + (5 * i + n) % 45 for i in range(70 + n)] for n in range(3)]  # ids within the tiny vocabulary
        got = batching.batched_forward(target.model, [batching.Call(lm, ids, 1) for lm, ids in zip(lms, long)])
        lms[1].rollback(60)  # caches of 70, 60 and 72 tokens
        for step in ([[3, 4], [5], [6, 7, 8, 9, 10]], [[11], [12, 13], [14]]):
            got += batching.batched_forward(target.model, [batching.Call(lm, t, k) for lm, t, k
                                                           in zip(lms, step, (None, 1, 2))])
        got += [lm.forward([6, 7]) for lm in lms]
        if kind == "features":
            got += [lm.features[: lm.length] for lm in lms]
        out[flag] = got
        assert calls == ([] if flag == "0" else [5, 2, 2, 2, 2])  # the batched prefill (70-72 tokens) ran HF's
    assert all(torch.equal(a, b) for a, b in zip(out["1"], out["0"])), [
        float((a - b).abs().max()) for a, b in zip(out["1"], out["0"])]


def test_batched_feature_draft_layer_passes_are_bit_identical(tiny_pair, tiny_feature_dir, lean_on):
    """The feature draft's layer (fed [feature ; embedding] vectors, returning hidden states), batched over three
    runs: lean_dynamic.body on the merged cache, the same predicted features as HF's modules bit for bit."""
    from decoding.drafters.feature import FeatureDraftLM

    target = tiny_pair[0]
    model = load_draft_value(str(tiny_feature_dir), target, "float32").drafter(target).model
    pairs = torch.randn(30, 2 * model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    out = {}
    for flag in ("0", "1"):
        calls = lean_on(flag)
        lms = [FeatureDraftLM(model, CPU) for _ in range(3)]
        for lm, n in zip(lms, (4, 7, 5)):
            lm.forward(pairs[:n])
        calls.clear()
        got = batching.batched_forward(model, [batching.Call(lm, x, 1) for lm, x in
                                               zip(lms, (pairs[10:12], pairs[12:13], pairs[13:16]))])
        out[flag] = got + [lm.forward(pairs[20:21]) for lm in lms]
        assert calls == ([] if flag == "0" else [3, 1, 1, 1])
    assert all(torch.equal(a, b) for a, b in zip(out["1"], out["0"]))


@pytest.mark.requires_embedded_target
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_default_target_logits_are_bit_identical(dtype, lean_on):
    """SmolLM2-135M-Instruct (30 layers, 9 query / 3 key-value heads): a chat prefill, 8 greedy steps, 5- and
    9-token verify passes after a rollback: torch.equal with the switch on and off."""
    from decoding.lm.models import DEFAULT_TARGET, load_model_cached

    target = load_model_cached(DEFAULT_TARGET, device="cpu", dtype=dtype)
    ids = target.encode_prompt("Explain why the sky is blue in two sentences.", chat=True)
    out = {}
    for flag in ("0", "1"):
        calls = lean_on(flag)
        lm = CachedLM(target.model, CPU, target.vocab_size)
        logits = [lm.forward(ids)]
        seq = list(ids)
        for _ in range(8):
            seq.append(int(logits[-1][-1].argmax()))
            logits.append(lm.forward(seq[-1:]))
        lm.rollback(len(seq) - 4)
        logits += [lm.forward(seq[-4:] + [42]), lm.forward([1337, 7, 99, 5, 6, 7, 8, 9, 10])]
        out[flag] = logits
    assert calls == [len(ids)] + [1] * 8 + [5, 9]
    assert all(torch.equal(a, b) for a, b in zip(out["1"], out["0"]))
