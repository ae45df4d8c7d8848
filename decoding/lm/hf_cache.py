"""How a transformers model takes and returns its KV cache, across the versions requirements.txt allows.

transformers 5.x renamed a model call's `past_key_values` argument and output field to `cache`: the old name
still works in the versions that renamed it, with a FutureWarning per call (removal announced for 5.40), and is
the only name in the versions before. `cache_kwargs(model, cache)` names the argument the model's own `forward`
declares; `grown_cache(out)` reads whichever field the output class has. Neither warns in any version.
"""

from __future__ import annotations

import inspect

import torch

NEW, OLD = "cache", "past_key_values"
_ARGUMENT: dict[type, str] = {}  # model class -> the name its forward takes


def cache_argument(model: torch.nn.Module) -> str:
    """"cache" where `model.forward` declares it, else "past_key_values" (read once per model class)."""
    kind = type(model)
    if kind not in _ARGUMENT:
        try:
            declared = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):  # a forward without a readable signature: the old name always worked
            declared = {}
        _ARGUMENT[kind] = NEW if NEW in declared else OLD
    return _ARGUMENT[kind]


def cache_kwargs(model: torch.nn.Module, cache) -> dict:
    """{name: cache} for a call of `model`: model(..., **cache_kwargs(model, cache))."""
    return {cache_argument(model): cache}


def grown_cache(out):
    """The cache a model call returned: its output's `cache` field, or `past_key_values` before the rename."""
    fields = getattr(type(out), "__dataclass_fields__", {})
    return getattr(out, NEW) if NEW in fields else getattr(out, OLD)
