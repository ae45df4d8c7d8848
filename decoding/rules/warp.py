"""Temperature, top-k and top-p as transforms from logits to one probability distribution.

Leviathan et al. (section 2.2, "standardized sampling"; docs/papers.md) note that these settings all
turn logits into *one* distribution, so speculative sampling stays exact as long as the very same
transform is applied to the target logits (giving p) and to the draft logits (giving q).
The order and the top-p boundary follow transformers' logits warpers: temperature, then top-k
(ties at the k-th value are kept), then top-p (a token is dropped when the cumulative mass of the
tokens below it, in ascending order, is <= 1 - top_p; the most likely token is always kept).
Temperature 0 means greedy: a one-hot distribution at the argmax of the raw logits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..errors import keyed


@dataclass(frozen=True)
class SamplingConfig:
    """The user's sampling settings; `top_k=0` and `top_p=1.0` switch those filters off."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        validate_sampling(self.temperature, self.top_k, self.top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def as_dict(self) -> dict:
        return asdict(self)


def validate_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """Raise ValueError with a user-facing message for settings outside their domain."""
    if not (temperature >= 0) or temperature != temperature or temperature == float("inf"):
        raise keyed(f"temperature must be a finite number >= 0 (got {temperature})", "settings.temperature",
                    value=temperature)
    if int(top_k) != top_k or top_k < 0:
        raise keyed(f"top-k must be a whole number >= 0, 0 meaning off (got {top_k})", "settings.top_k", value=top_k)
    if not (0 < top_p <= 1):
        raise keyed(f"top-p must be in (0, 1] (got {top_p})", "settings.top_p", value=top_p)


ARGMAX_CHUNK = 1024  # argmax_index's chunk width


def argmax_index(row: torch.Tensor) -> int:
    """int(row.argmax()) of a 1-D row (V,): the first index of its largest value, a NaN counted largest.

    PyTorch's CPU argmax scans element by element (about 55 us over 49152 floats here, where the vectorised amax
    takes 8), so a wide CPU row is cut into chunks of ARGMAX_CHUNK: the chunks' maxima come from amax (a NaN
    propagates), the argmax of those maxima is the first chunk holding the row's largest value (or its first NaN),
    and that chunk's own argmax is the first index of it there: the same index as the whole row's argmax. Other
    rows (another device, where the host read would wait; narrow or uneven rows) take argmax itself."""
    n = row.shape[-1] if row.dim() else 0
    if row.dim() != 1 or row.device.type != "cpu" or n < 8 * ARGMAX_CHUNK or n % ARGMAX_CHUNK:
        return int(row.argmax())
    chunks = row.view(-1, ARGMAX_CHUNK)
    chunk = int(chunks.amax(dim=1).argmax())
    return chunk * ARGMAX_CHUNK + int(chunks[chunk].argmax())


def warp_logits(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Return probabilities over the last dimension of `logits` (float32) under `config`."""
    logits = logits.float()
    if config.greedy:
        if logits.dim() == 1 and logits.device.type == "cpu":  # one row: its argmax as argmax_index finds it
            index = torch.tensor(argmax_index(logits))
        else:
            index = logits.argmax(dim=-1)
        return torch.nn.functional.one_hot(index, num_classes=logits.shape[-1]).to(torch.float32)
    scores = logits / config.temperature
    if config.top_k and config.top_k < scores.shape[-1]:
        kth_value = torch.topk(scores, config.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth_value, float("-inf"))
    if config.top_p < 1.0:
        sorted_scores, sorted_index = torch.sort(scores, dim=-1, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= (1 - config.top_p)
        drop_sorted[..., -1:] = False  # always keep the most likely token
        drop = drop_sorted.scatter(-1, sorted_index, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return torch.softmax(scores, dim=-1)
