"""Bytes a visitor's session holds of its own: what a class of idle sessions costs the server.

`deep_bytes(value)` walks a value's objects (attributes, slots, dict entries, sequence items) and
adds `sys.getsizeof` of each once, and for a tensor the bytes of its storage once; it does not walk
into what every session shares: models (torch modules, `LoadedModel`, `pair.Draft`), classes,
functions and modules. `session_bytes(session)` is that for a `Session`: its records, summary and
settings, the bytes a server keeps per visitor beyond the shared weights (`scripts/classroom_load.py`
reports what the whole process holds).
"""

from __future__ import annotations

import sys
import types

import torch

_NOT_WALKED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
               torch.nn.Module)


def _shared(value) -> bool:
    """A value every session shares (not counted): a model, a class, a function, a module."""
    if isinstance(value, _NOT_WALKED):
        return True
    from decoding.lm.models import LoadedModel
    from decoding.run.pair import Draft

    return isinstance(value, (LoadedModel, Draft))


def deep_bytes(value, seen: set[int] | None = None) -> int:
    """Bytes of `value` and of everything it holds that is not shared (see the module doc); objects
    in `seen` (ids) are not counted again, and the ones walked are added to it."""
    seen = set() if seen is None else seen
    total, stack = 0, [value]
    storages: set[int] = set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or _shared(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
            total += sys.getsizeof(obj)
            continue
        total += sys.getsizeof(obj)
        if isinstance(obj, (str, bytes, bytearray, int, float, bool, complex)):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        attributes = getattr(obj, "__dict__", None)
        if attributes is not None:
            stack.append(attributes)
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                    stack.append(getattr(obj, name))
    return total


def session_bytes(session) -> int:
    """Bytes a `Session` holds of its own (shared models not counted)."""
    return deep_bytes(session)
