"""Plain JSON data <-> typed dataclasses, with every field's type checked on the way in.

Trace files, method settings and method trace data all travel as JSON. `from_plain(cls, data)`
builds `cls` (a dataclass) from such data and raises `PlainDataError` naming the first field
whose value has the wrong type: a string where a number belongs, NaN or Infinity, a list where a
record belongs. Unknown keys are ignored, so older readers open newer files. `to_plain(obj)` is
the inverse (`dataclasses.asdict`, which leaves dicts and lists of plain values as they are).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import lru_cache
from typing import Any, Union

__all__ = ["PlainDataError", "from_plain", "to_plain", "check_value", "MayBeInfinite", "ByName"]

# Annotated[float, MAY_BE_INFINITE]: a float field where +-Infinity is a meaningful value (e.g. a KL
# divergence against a distribution with zeros); NaN is refused everywhere.
MAY_BE_INFINITE = "may be infinite"
MayBeInfinite = typing.Annotated[float, MAY_BE_INFINITE]


class ByName:
    """Mixin for typed plain data: `obj["field"]` reads a field as the JSON form would (for readers
    written against the JSON form); the typed attributes are the way to read it."""

    def __getitem__(self, key: str):
        if not isinstance(key, str) or key not in {f.name for f in dataclasses.fields(self)}:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key) -> bool:
        return isinstance(key, str) and any(f.name == key for f in dataclasses.fields(self))


class PlainDataError(ValueError):
    """A value does not have the type its field declares; the message names the field's path."""


@lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value[:30]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def check_value(value, annotation, where: str):
    """`value` converted to `annotation` (int -> float where a float is declared), or PlainDataError."""
    if annotation is Any or annotation is object:
        return value
    if typing.get_origin(annotation) is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        if base is float and MAY_BE_INFINITE in meta and isinstance(value, float) and math.isinf(value):
            return value
        return check_value(value, base, where)
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return check_value(value, option, where)
            except PlainDataError as exc:
                errors.append(exc)
        raise errors[0] if errors else PlainDataError(f"{where}: unexpected null")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):  # a tuple arrives from Python callers, never from JSON
            raise PlainDataError(f"{where}: expected a list, got {_describe(value)}")
        args = typing.get_args(annotation)
        item = args[0] if args else Any
        return [check_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise PlainDataError(f"{where}: expected an object, got {_describe(value)}")
        args = typing.get_args(annotation)
        item = args[1] if len(args) == 2 else Any
        return {k: check_value(v, item, f"{where}.{k}") for k, v in value.items()}
    if annotation in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise PlainDataError(f"{where}: expected a list, got {_describe(value)}")
        return list(value)
    if annotation is dict:
        if not isinstance(value, dict):
            raise PlainDataError(f"{where}: expected an object, got {_describe(value)}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise PlainDataError(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise PlainDataError(f"{where}: expected a whole number, got {_describe(value)}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlainDataError(f"{where}: expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise PlainDataError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise PlainDataError(f"{where}: expected text, got {_describe(value)}")
        return value
    if dataclasses.is_dataclass(annotation):
        return from_plain(annotation, value, where)
    return value


def from_plain(cls, data, where: str = ""):
    """Build dataclass `cls` from a JSON object, checking each field against its annotation."""
    name = where or cls.__name__
    if not isinstance(data, dict):
        raise PlainDataError(f"{name}: expected an object, got {_describe(data)}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise PlainDataError(f"{name}: missing field '{f.name}'")
            continue
        kwargs[f.name] = check_value(data[f.name], hints[f.name], f"{name}.{f.name}" if where else f.name)
    return cls(**kwargs)


def to_plain(obj) -> dict:
    """The JSON form of a dataclass instance."""
    return dataclasses.asdict(obj)
