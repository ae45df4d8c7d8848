"""The prompt tokens of PPD (Chen et al., sections 3.1-3.2): m prompt tokens with `ept` ensemble
embeddings each, living in the target's hidden size. The target stays frozen; these few vectors
are all PPD trains (3 x 576 floats for SmolLM2-135M with 1 EPT).

Shipped embeddings live in `assets/ppd/<model name>/prompt_tokens.pt` (with `card.json`). Until
they ship, `load_prompt_tokens` falls back to UNTRAINED embeddings: every prompt token starts as
the target's embedding of a neutral text token (a space, else end-of-sequence), as the paper
initializes training. Their predictions are poor (little is accepted) but the output is still
exactly the target's greedy output: verification never trusts them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ...paths import PPD_ASSETS, display_path

DEFAULT_PROMPT_TOKENS = 3
DEFAULT_EPT = 1


class PromptTokens(nn.Module):
    """weight[k - 1, j] is the embedding of prompt token k (distance k), ensemble copy j."""

    def __init__(self, m: int, ept: int, hidden: int, init: torch.Tensor | None = None, trained: bool = False,
                 source: str = ""):
        super().__init__()
        if m < 1 or ept < 1:
            raise ValueError("need m >= 1 prompt tokens and ept >= 1 ensemble embeddings")
        weight = torch.zeros(m, ept, hidden) if init is None else init.detach().float().reshape(1, 1, hidden).repeat(m, ept, 1)
        self.weight = nn.Parameter(weight)
        self.trained = trained
        self.source = source or ("untrained" if not trained else "")

    @property
    def m(self) -> int:
        return self.weight.shape[0]

    @property
    def ept(self) -> int:
        return self.weight.shape[1]

    @property
    def hidden(self) -> int:
        return self.weight.shape[2]

    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()

    def embeddings(self, distances: list[int], groups: list[int]) -> torch.Tensor:
        """(len, hidden) embeddings of the prompt tokens (distance k >= 1, group j)."""
        k = torch.tensor(distances, dtype=torch.long, device=self.weight.device) - 1
        j = torch.tensor(groups, dtype=torch.long, device=self.weight.device)
        return self.weight[k, j]

    def save(self, path: str | Path, meta: dict | None = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"weight": self.weight.detach().cpu(), "meta": dict(meta or {})}, tmp)
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path, device=None) -> "PromptTokens":
        data = torch.load(Path(path), map_location="cpu", weights_only=True)
        weight = data["weight"]
        module = cls(weight.shape[0], weight.shape[1], weight.shape[2], trained=True, source=display_path(path))
        module.weight.data.copy_(weight)
        module.meta = data.get("meta", {})
        return module.to(device) if device is not None else module


def neutral_token_id(tokenizer) -> int:
    ids = tokenizer.encode(" ", add_special_tokens=False)
    if ids:
        return int(ids[0])
    return int(tokenizer.eos_token_id or 0)


def untrained_prompt_tokens(target, m: int = DEFAULT_PROMPT_TOKENS, ept: int = DEFAULT_EPT) -> PromptTokens:
    """Prompt tokens initialized from the target's embedding of a neutral token (untrained)."""
    embed = target.model.get_input_embeddings()
    token = neutral_token_id(target.tokenizer)
    with torch.no_grad():
        init = embed(torch.tensor([token], device=target.device))[0].float().cpu()
    module = PromptTokens(m, ept, init.shape[-1], init=init, trained=False,
                          source=f"untrained: embedding of token {token} ({target.decode_token(token)!r})")
    return module.to(target.device)


def asset_path(target) -> Path:
    return PPD_ASSETS / target.name / "prompt_tokens.pt"


def load_prompt_tokens(target, path: str | Path | None = None, m: int | None = None,
                       ept: int | None = None) -> PromptTokens:
    """Trained embeddings from `path` or the target's asset, else untrained ones (see module doc);
    frozen (no grad) for inference."""
    return _load_prompt_tokens(target, path, m, ept).requires_grad_(False)


def _load_prompt_tokens(target, path, m, ept) -> PromptTokens:
    candidate = Path(path) if path else asset_path(target)
    if candidate.exists():
        module = PromptTokens.load(candidate, target.device)
        hidden = target.model.get_input_embeddings().weight.shape[-1]
        if module.hidden != hidden:
            raise ValueError(f"prompt embeddings in {candidate} have hidden size {module.hidden}, the target {hidden}")
        if (m is not None and m != module.m) or (ept is not None and ept != module.ept):
            raise ValueError(f"{candidate} holds m={module.m}, ept={module.ept} prompt tokens")
        return module
    if path:
        raise ValueError(f"no prompt embeddings at {path}")
    return untrained_prompt_tokens(target, m or DEFAULT_PROMPT_TOKENS, ept or DEFAULT_EPT)
