"""Our own forward of a Llama decoder layer for the static cache's short passes (`static_lm.py`, n <= 64 tokens),
run instead of HF's modules layer by layer (switch: SPECDEC_LEAN_LAYER=0 keeps HF's modules, to compare; on by
default on CPUs and CUDA GPUs, where it was measured faster: docs/bench/lean-layer-cpu.json, docs/gpu.md).

Why: a captured one-token step of the default target replays about 37 kernels a layer (measured on an H200:
3.09 ms for 30 layers; docs/spaces-and-gpus.md), most of them small: separate q, k, v and gate, up
projections, rotary embedding per tensor, casts. Here a layer is one pure function of tensors,
`layer_step(x, w, k_buf, v_buf, slots, cos, sin, mask)`, doing the same math with fewer, larger ops:

    h = rms_norm(x) * w_in                                    (n, d)        fused RMS norm (static_kernels)
    q|k|v = h W_qkv^T, W_qkv = [W_q; W_k; W_v]                ((heads + 2 kv_heads) x head_dim) rows, one matmul
    q|k = q|k * cos + rotate_half(q|k) * sin                  one rotary pass over q and k together
    k_buf[:, :, slots], v_buf[:, :, slots] = k, v             index_copy_ into this layer's slot buffers
    a = softmax(q k_buf^T / sqrt(head_dim) + mask) v_buf      static_kernels.grouped_slot_attention (GQA fold)
    x = x + a W_o^T
    g|u = (rms_norm(x) * w_post) W_gu^T, W_gu = [W_gate; W_up]   one matmul
    x = x + (silu(g) * u) W_down^T

with x (n, d) the pass's hidden states (batch 1), cos/sin (n, head_dim) computed once per pass by the model's
own rotary embedding (so every RoPE variant HF implements is kept), mask (1, 1, n, C) the static cache's
additive mask, slots (n,) where the pass writes. These are HF's LlamaDecoderLayer's functions in HF's
precisions (norms in float32, softmax in float32, everything else in the model's dtype); only the blocking of
the fused matmuls and the attention's summation order differ, so float32 logits equal HF's to ~1e-5 and greedy
tokens are the same (tests/decoding/lm/test_lean_layer.py).

Weights: taken from the HF model once per model (at its first lean pass, `lean_model`), never copied to disk.
W_qkv and W_gu are new concatenated tensors, and HF's q/k/v and gate/up projections are then re-pointed at
row slices (views) of them, so the model holds each weight once, as before (placed at the old weights' address
modulo 64 bytes, so HF's modules on the views keep their float32 rounding: `_stacked`); a model whose weights were
replaced since (moved, re-cast) is re-read. The norms', o and down weights are used as they are.

Compile (on CUDA by default, elsewhere with SPECDEC_COMPILE=1; `compiled_body.lean_run`): `layer_step`'s arguments are tensors and one tuple
of tensors (plus eps, the same float in every layer), never a per-layer Python int such as a layer index, so
one compiled `layer_step` serves all layers of all models (regional compilation): dynamo compiles it once for
one-token passes and once for longer ones (it specialises a size of 1), and every layer replays those graphs.

Fits only a Llama-shaped decoder (`misfit` says why not): Llama or Mistral layers (full attention), plain
Linear projections without biases, SiLU MLP, RMS norms, scaling 1/sqrt(head_dim). Any other model (other
architectures, biases, other norms) runs today's path (HF's modules with the short-pass kernels).
"""

from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .devices import env_flag
from .static_kernels import _is_rms_norm, grouped_slot_attention, rms_norm

ENV = "SPECDEC_LEAN_LAYER"  # "0": the static short passes run HF's modules (with static_kernels' swaps)
LAYER_CLASSES = ("LlamaDecoderLayer", "MistralDecoderLayer")
ALIGN = 64  # bytes: a stacked weight keeps its address modulo this (`_stacked`)

_models: "weakref.WeakKeyDictionary[torch.nn.Module, object]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class LayerWeights(NamedTuple):
    """One layer's weights for `layer_step` (d = hidden, f = intermediate size, hd = head_dim)."""

    norm_in: torch.Tensor  # (d,)
    qkv: torch.Tensor  # ((heads + 2 kv_heads) hd, d): [W_q; W_k; W_v]
    o: torch.Tensor  # (d, heads hd)
    norm_post: torch.Tensor  # (d,)
    gate_up: torch.Tensor  # (2 f, d): [W_gate; W_up]
    down: torch.Tensor  # (d, f)
    eps: float  # the RMS norms' epsilon (the same in every layer)


class LeanModel(NamedTuple):
    """A decoder's lean weights: `layers` in order, the final norm, the rotary embedding module."""

    layers: list
    norm: torch.Tensor  # (d,)
    eps: float
    rotary: torch.nn.Module  # HF's rotary embedding: (x, position_ids (1, n)) -> cos, sin (1, n, hd)
    source: torch.Tensor  # layer 0's q weight when read (re-read when the model's weight is another tensor)
    kept_alignment: bool  # every re-pointed weight kept its address modulo ALIGN (`_keeps_alignment`)


def enabled(device) -> bool:
    """SPECDEC_LEAN_LAYER on, or unset on a CPU or a CUDA GPU: on both it was measured faster than HF's modules
    (the CPU: docs/bench/lean-layer-cpu.json; an H200: a captured one-token step replayed in 2.94 against 3.35 ms
    with HF's modules and our short-pass kernels, docs/bench/gpu/gpu-profile-h200.json). Other devices: off unless
    set."""
    return env_flag(ENV, torch.device(device).type in ("cpu", "cuda"))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., hd) -> (-x[hd/2:], x[:hd/2]) along the last axis (HF's rotate_half)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def layer_step(x: torch.Tensor, w: LayerWeights, k_buf: torch.Tensor, v_buf: torch.Tensor, slots: torch.Tensor,
               cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One decoder layer (module doc): x (n, d), k_buf/v_buf (1, kv_heads, C, hd) written at `slots` (n,),
    cos/sin (n, hd), mask (1, 1, n, C) additive -> the layer's output (n, d). The head counts come from the
    shapes (kv_heads = k_buf.shape[1], heads = o's columns / hd), so no per-layer number is an argument."""
    n = x.shape[0]
    kv_heads, hd = k_buf.shape[1], k_buf.shape[3]
    heads = w.o.shape[1] // hd
    qkv = F.linear(rms_norm(x, w.norm_in, w.eps), w.qkv)  # (n, (heads + 2 kv_heads) hd)
    qk = qkv[:, : (heads + kv_heads) * hd].view(n, heads + kv_heads, hd)
    qk = qk * cos[:, None] + rotate_half(qk) * sin[:, None]  # q and k rotated together
    v = qkv[:, (heads + kv_heads) * hd:].view(n, kv_heads, hd)
    k_buf.index_copy_(2, slots, qk[:, heads:].transpose(0, 1)[None])
    v_buf.index_copy_(2, slots, v.transpose(0, 1)[None])
    query = qk[:, :heads].transpose(0, 1)[None]  # (1, heads, n, hd)
    attn = grouped_slot_attention(query, k_buf, v_buf, mask, hd ** -0.5)  # (1, n, heads, hd)
    x = x + F.linear(attn.reshape(n, heads * hd), w.o)
    gate, up = F.linear(rms_norm(x, w.norm_post, w.eps), w.gate_up).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, w.down)


def misfit(decoder: torch.nn.Module) -> str | None:
    """None when `decoder` (a LlamaModel-like stack: layers, norm, rotary_emb) fits `layer_step`; else why not."""
    layers = getattr(decoder, "layers", None)
    if layers is None or not len(layers) or not _is_rms_norm(getattr(decoder, "norm", None) or torch.nn.Module()) \
            or getattr(decoder, "rotary_emb", None) is None:
        return "not a Llama-shaped decoder (layers, final RMS norm, rotary embedding)"
    if len(layers) != getattr(getattr(decoder, "config", None), "num_hidden_layers", len(layers)):
        return "it runs fewer layers than it holds"
    for layer in layers:
        if type(layer).__name__ not in LAYER_CLASSES:
            return f"its layers are {type(layer).__name__}, not {' or '.join(LAYER_CLASSES)}"
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        linears = [getattr(attn, name, None) for name in ("q_proj", "k_proj", "v_proj", "o_proj")] + \
                  [getattr(mlp, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
        if any(type(m) is not torch.nn.Linear for m in linears):
            return "its projections are not plain linear layers"
        if any(m.bias is not None for m in linears):
            return "its projections have biases"
        if not (_is_rms_norm(layer.input_layernorm) and _is_rms_norm(layer.post_attention_layernorm)):
            return "its norms are not RMS norms"
        if layer.input_layernorm.variance_epsilon != layer.post_attention_layernorm.variance_epsilon:
            return "its two norms of a layer have different epsilons"
        if type(getattr(mlp, "act_fn", None)).__name__ not in ("SiLU", "SiLUActivation") \
                or getattr(mlp.config, "hidden_act", "silu") not in ("silu", "swish"):
            return "its MLP's activation is not SiLU"
        if abs(attn.scaling - attn.head_dim ** -0.5) > 1e-12 or getattr(attn.config, "attn_logit_softcapping", None):
            return "its attention is scaled or capped otherwise"
    return None


def _stacked(linears: list[torch.nn.Linear]) -> torch.Tensor:
    """The linears' weights stacked by rows into one new tensor; each linear's weight then becomes a row slice
    (a view) of it, so the weights are held once. Outside inference mode: the model stays trainable.

    On the CPU the new tensor starts at the first weight's address modulo ALIGN bytes, so weights that lay back to
    back (as a checkpoint's do: `_keeps_alignment`) keep their alignment: on this project's CPU a float32 one-row
    matmul (a one-token step's projection) rounds differently on a weight at 8 mod 16 bytes than on an aligned copy
    (the default target's float32 weights sit at 40 mod 64), so HF's modules on the views compute bit for bit what
    they did before."""
    weights = [m.weight.detach() for m in linears]
    first, width = weights[0], weights[0].shape[1]
    rows = sum(w.shape[0] for w in weights)
    size = first.element_size()
    cpu = first.device.type == "cpu"  # elsewhere (CUDA) a fresh, fully aligned tensor, as before
    buffer = first.new_empty(rows * width + (ALIGN // size if cpu else 0))
    start = ((first.data_ptr() - buffer.data_ptr()) % ALIGN) // size if cpu else 0
    stacked = buffer[start: start + rows * width].view(rows, width)
    row = 0
    for m, w in zip(linears, weights):
        stacked[row: row + w.shape[0]].copy_(w)
        m.weight.data = stacked[row: row + w.shape[0]]
        row += w.shape[0]
    return stacked


def _keeps_alignment(decoder: torch.nn.Module) -> bool:
    """Would `_stacked` leave every q/k/v and gate/up weight of `decoder` at its address modulo ALIGN? (Each
    weight after the first of its group must start where the previous one's bytes end, modulo ALIGN.)"""
    for layer in decoder.layers:
        for group in ((layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj),
                      (layer.mlp.gate_proj, layer.mlp.up_proj)):
            at = group[0].weight.data_ptr()
            for m in group:
                if m.weight.data_ptr() % ALIGN != at % ALIGN:
                    return False
                at += m.weight.numel() * m.weight.element_size()
    return True


def lean_model(decoder: torch.nn.Module, exact: bool = False) -> LeanModel | None:
    """The lean weights of `decoder`, read once per model (module doc), or None when it does not fit. `exact`:
    also None when reading them would move a weight off its address modulo ALIGN (`_stacked`), or did (a model
    first read without `exact`); nothing is read then, so HF's modules keep computing exactly what they did."""
    with _lock:
        found = _models.get(decoder)
        if isinstance(found, LeanModel):
            q = decoder.layers[0].self_attn.q_proj.weight
            if q.data_ptr() == found.source.data_ptr() and q.dtype == found.source.dtype \
                    and q.device == found.source.device:
                return found if found.kept_alignment or not exact else None
        elif isinstance(found, str):
            return None
        reason = misfit(decoder)
        if reason is not None:
            _models[decoder] = reason
            return None
        kept = _keeps_alignment(decoder)
        if exact and not kept:
            return None
        with torch.inference_mode(False), torch.no_grad():
            layers = []
            for layer in decoder.layers:
                attn, mlp = layer.self_attn, layer.mlp
                qkv = _stacked([attn.q_proj, attn.k_proj, attn.v_proj])
                gate_up = _stacked([mlp.gate_proj, mlp.up_proj])
                norm_in, norm_post = layer.input_layernorm, layer.post_attention_layernorm
                layers.append(LayerWeights(norm_in.weight.detach(), qkv, attn.o_proj.weight.detach(),
                                           norm_post.weight.detach(), gate_up, mlp.down_proj.weight.detach(),
                                           float(norm_in.variance_epsilon)))
        found = LeanModel(layers, decoder.norm.weight.detach(), float(decoder.norm.variance_epsilon),
                          decoder.rotary_emb, layers[0].qkv, kept)
        _models[decoder] = found
        return found


def lean_body(lean: LeanModel, hidden: torch.Tensor, positions: torch.Tensor, cache, slots: torch.Tensor,
              mask: torch.Tensor, step=layer_step) -> torch.Tensor:
    """The decoder over hidden (1, n, d) entering layer 0, at rotary positions (1, n), writing at slots (n,) of
    the SlotCache `cache` (allocated), under mask (1, 1, n, C): the final normed hidden states (1, n, d).
    `step`: layer_step or its compiled form."""
    cos, sin = lean.rotary(hidden, positions)  # (1, n, hd) each, in hidden's dtype: once for all layers
    x, cos, sin = hidden[0], cos[0], sin[0]
    for w, layer in zip(lean.layers, cache.layers):
        x = step(x, w, layer.keys, layer.values, slots, cos, sin, mask)
    return rms_norm(x, lean.norm, lean.eps)[None]


def forget(decoder: torch.nn.Module) -> None:
    """Drop what was read of `decoder` (tests)."""
    with _lock:
        _models.pop(decoder, None)
