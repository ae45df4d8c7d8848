"""The draft's architecture: a small Llama with the target's tokenizer and vocabulary, its input
embedding initialized from the target's (the top principal directions), head tied to it."""

from __future__ import annotations

import math

import torch

from .config import DistillConfig


def draft_config(cfg: DistillConfig, target_config):
    from transformers import LlamaConfig

    tc = target_config
    rope = getattr(tc, "rope_parameters", None) or {"rope_type": "default", "rope_theta": getattr(tc, "rope_theta", 10000.0)}
    return LlamaConfig(
        vocab_size=tc.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        hidden_act="silu",
        max_position_embeddings=getattr(tc, "max_position_embeddings", 2048),
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        rope_parameters=dict(rope),
        bos_token_id=tc.bos_token_id,
        eos_token_id=tc.eos_token_id,
        pad_token_id=getattr(tc, "pad_token_id", None),
        attention_bias=False,
        mlp_bias=False,
    )


def build_draft(cfg: DistillConfig, target_model, seed: int):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(draft_config(cfg, target_model.config))
    if cfg.init_embeddings_from_target:
        emb = target_model.get_input_embeddings().weight.detach().float().cpu()
        k = cfg.hidden_size
        if k <= emb.shape[1]:
            # top-k right singular vectors: the best rank-k linear view of the target's tokens
            _, _, vh = torch.linalg.svd(emb[:: max(1, emb.shape[0] // 16384)], full_matrices=False)
            proj = emb @ vh[:k].T
            proj = proj * (0.02 * math.sqrt(k) / proj.norm(dim=1).mean())  # usual init scale
            with torch.no_grad():
                model.get_input_embeddings().weight.copy_(proj)
    model.tie_weights()
    return model
