"""Teacher-forced scoring: one forward pass of a model over prompt + continuation, read at the
positions that predict the continuation (the draft evaluation and the benchmark's perplexity)."""

from __future__ import annotations

import torch


@torch.inference_mode()
def teacher_forced_probs(model, prompt: list[int], cont: list[int], width: int, head=None) -> torch.Tensor:
    """Temperature-1 distributions of `model` (a LoadedModel) at the positions that predict `cont`
    (len(cont) x width); with a
    restricted output head (output_head.py), over its tokens only (zeros elsewhere)."""
    ids = torch.tensor([prompt + cont[:-1]], device=model.device)
    if head is not None:
        hidden = model.model.get_decoder()(input_ids=ids).last_hidden_state[0, len(prompt) - 1:]
        logits = head.logits(hidden, width)
    else:
        logits = model.model(input_ids=ids).logits[0, len(prompt) - 1 :, :width].float()
    return torch.softmax(logits, dim=-1).cpu()


@torch.inference_mode()
def teacher_forced_logprob(target, prompt_ids: list[int], new: list[int]) -> float:
    """Sum of log p_raw (temperature 1, unwarped) of `new` after `prompt_ids`, teacher-forced."""
    ids = torch.tensor([prompt_ids + new], device=target.device)
    logits = target.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    lp = logits.log_softmax(-1)
    return float(lp[torch.arange(len(new)), torch.tensor(new)].sum())
