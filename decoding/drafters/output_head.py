"""A draft's output head restricted to the tokens the target actually writes (a frequency-ranked
vocabulary, as in FR-Spec: Zhao et al., 2025, arXiv:2502.14856).

A draft step of a small model is bound by its output head: the distilled draft's tied 49152 x 256
head is 12.6M of its 16.8M parameters. A head over the K most frequent tokens of the target's
outputs costs K/49152 of that. q stays a full-vocabulary distribution with explicit zeros outside
the subset (its logits there are -inf), so the acceptance rule and the residual norm(max(0, p - q))
are computed over the full vocabulary as always: a token outside the subset is never drafted, and
the target's mass on it reaches the output through the residual. Exactness does not depend on K.

On disk: `head.safetensors` beside the draft's config.json, holding `token_ids` (K, int64) and
`weight` (K x hidden), untied from the input embedding (it may be trained on its own). A head cut
from the draft's own head with no retraining (`python -m training trim-head`) stores `token_ids` only:
its rows are taken from the model's output embedding when the draft loads, so no weight is stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

HEAD_FILE = "head.safetensors"


@dataclass(eq=False)
class OutputHead:
    token_ids: torch.Tensor  # (K,) int64: the vocabulary ids the head scores
    weight: torch.Tensor  # (K, hidden), in the model's dtype and device

    def __post_init__(self) -> None:
        # the largest id, read once: a step then needs no mask (and no GPU sync) to place the logits
        self.max_id = int(self.token_ids.max()) if self.token_ids.numel() else -1

    @property
    def size(self) -> int:
        return int(self.token_ids.numel())

    @property
    def weight_bytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()

    def sub_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits (n, K) of the head's own tokens (column j scores token_ids[j]) from hidden (n, hidden)."""
        return (hidden.to(self.weight.dtype) @ self.weight.T).float()

    def logits(self, hidden: torch.Tensor, width: int) -> torch.Tensor:
        """Full-width float32 logits from final hidden states (n, hidden): -inf outside the subset."""
        sub = self.sub_logits(hidden)
        out = torch.full((hidden.shape[0], width), float("-inf"), device=hidden.device)
        if self.max_id < width:  # every id inside the shared vocabulary: one index_copy_
            return out.index_copy_(1, self.token_ids, sub)
        keep = self.token_ids < width
        out[:, self.token_ids[keep]] = sub[:, keep]
        return out

    def save(self, directory: str | Path, with_weight: bool = True) -> Path:
        """Write `head.safetensors`; `with_weight` False: the token ids only (rows of the model's own head)."""
        from safetensors.torch import save_file

        path = Path(directory) / HEAD_FILE
        tensors = {"token_ids": self.token_ids.cpu().long()}
        if with_weight:
            tensors["weight"] = self.weight.detach().cpu().contiguous()
        save_file(tensors, str(path))
        return path


def subset_head(model: torch.nn.Module, token_ids) -> OutputHead:
    """The rows of `model`'s own output head for `token_ids` (untied copies)."""
    ids = torch.as_tensor(list(token_ids), dtype=torch.long)
    full = model.get_output_embeddings().weight
    return OutputHead(ids.to(full.device), full.detach()[ids.to(full.device)].clone())


def load_head(directory: str | Path, dtype: torch.dtype, device, model: torch.nn.Module | None = None) -> OutputHead | None:
    """The restricted head saved beside a draft, in the draft's dtype and device; None if there is none.
    A file of token ids only takes its rows from `model`'s output head."""
    path = Path(directory) / HEAD_FILE
    if not path.is_file():
        return None
    from safetensors.torch import load_file

    data = load_file(str(path))
    ids = data["token_ids"].long()
    if "weight" not in data:
        out_rows = model.get_output_embeddings() if model is not None else None
        rows = out_rows.weight if out_rows is not None else None
        if ids.dim() != 1 or rows is None or ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= rows.shape[0]:
            raise ValueError(f"{path} holds token ids only, which must index the draft's own output head "
                             f"({0 if rows is None else rows.shape[0]} rows)")
        return subset_head(model, ids.tolist())
    weight = data["weight"]
    if ids.dim() != 1 or weight.dim() != 2 or weight.shape[0] != ids.numel():
        raise ValueError(f"{path} is not an output head (token_ids (K,) and weight (K, hidden))")
    return OutputHead(ids.to(device), weight.to(device=device, dtype=dtype))


def frequent_tokens(token_lists, k: int, always=()) -> list[int]:
    """The k most frequent ids over `token_lists` (ties: smaller id first), plus `always` (e.g. eos)."""
    from collections import Counter

    # tensors are counted by value: a 0-d tensor hashes by identity, so each would count once
    counts = Counter(int(t) for tokens in token_lists
                     for t in (tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens))
    ranked = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    chosen = list(dict.fromkeys([*always, *ranked]))[:k]
    return sorted(chosen)
