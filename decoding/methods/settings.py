"""A method's own settings: one dataclass per method whose fields carry everything a front end needs.

Each field made with `knob(default, ...)` holds its default, range, help text, CLI flag and app
label. The CLI's flags (`cli.add_method_flags`), the app's controls and their server-side checks
(`app/controls.py`), "copy as CLI command", the benchmark and the strategies all read them from
there, so adding a setting means adding one field. Fields made with plain `field(...)` are
programmatic settings (no flag, no control), e.g. a measured acceptance table handed over by a
tuning run.

The settings travel in `RunConfig.extra` as plain data (the trace file's format), keyed by field
name; `from_dict` also accepts a knob's other names (`aliases`, `app_name`) that older traces and
the app use, checks types and ranges, and raises SettingsError (a ValueError) with a readable message and its
catalog key (`decoding.errors.Keyed`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import SettingsError
from ..trace.plain import PlainDataError, check_value

__all__ = ["Knob", "knob", "MethodSettings", "SAME"]

SAME = object()  # app_default: the same as the CLI default


@dataclass(frozen=True)
class Knob:
    """How one setting appears to users: CLI flag, app control, range, help."""

    flag: str  # the CLI flag, e.g. "--kl-bound"
    help: str  # one line for --help (the app shows `label`, and `info` under it where set)
    label: str  # the app control's label
    info: str = ""  # the app control's help line, in plain words for students (no flags); "" = none
    what: str = ""  # how error messages name it ("the KL bound D"); default: the field name
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None  # app slider step (whole numbers: 1)
    choices: tuple = ()
    aliases: tuple[str, ...] = ()  # other CLI flags (e.g. "--tree-budget")
    app: bool = True  # shown as an app control
    app_name: str | None = None  # the control's api name when it differs from the field name
    app_default: Any = SAME  # the app's default where it differs from the CLI's
    ui_maximum: float | None = None  # the slider's end where it is below `maximum`
    auto: Any = None  # the value meaning "decided automatically": never written into a command
    open_choices: bool = False  # `choices` are suggestions (the app's dropdown takes typed values); the class checks


def knob(default, **meta) -> Any:
    """A settings field with its `Knob` (see the module docstring)."""
    return field(default=default, metadata={"knob": Knob(**meta)})


@dataclass
class MethodSettings:
    """Base of every method's settings dataclass: validation, plain-data round trip, knob listing."""

    lenience_note: ClassVar[str | None] = None  # set: this method has its own rule, lenience must stay 1

    def __post_init__(self) -> None:
        self.validate()

    # --- the knobs ---------------------------------------------------------------------------
    @classmethod
    def knobs(cls) -> list[tuple[dataclasses.Field, Knob]]:
        """(field, knob) of every user-facing setting, in declaration order."""
        return [(f, f.metadata["knob"]) for f in dataclasses.fields(cls) if f.metadata.get("knob")]

    @classmethod
    def names(cls, f: dataclasses.Field) -> list[str]:
        """Every key under which a field's value may arrive (field name, app name, alias names)."""
        k = f.metadata.get("knob")
        names = [f.name]
        if k is not None:
            if k.app_name:
                names.append(k.app_name)
            names += [a.lstrip("-").replace("-", "_") for a in k.aliases]
        return names

    # --- plain data ----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict | None) -> "MethodSettings":
        """Typed, validated settings from plain data; absent keys take their defaults."""
        data = dict(data or {})
        hints = _hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            for name in cls.names(f):
                if name in data and data[name] is not None:
                    kwargs[f.name] = _coerce(data[name], hints[f.name], _what(f))
                    break
        return cls(**kwargs)

    @classmethod
    def from_config(cls, config) -> "MethodSettings":
        """The settings of a run (`RunConfig.extra`), checked against the run's common settings."""
        settings = cls.from_dict(config.extra)
        if cls.lenience_note and config.lenience != 1.0:
            raise SettingsError(cls.lenience_note, "settings.lenience_note." + cls.__name__)
        return settings

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # --- checks --------------------------------------------------------------------------------
    def validate(self) -> None:
        """Each knob's range and choices; subclasses add rules that involve several fields."""
        for f, k in self.knobs():
            value = getattr(self, f.name)
            if value is None or value == k.auto:
                continue
            what = _what(f)
            if k.choices and not k.open_choices and value not in k.choices:
                raise SettingsError(f"{what} must be one of {', '.join(map(str, k.choices))} (got {value!r})",
                                    "settings.choice", what=what, choices=", ".join(map(str, k.choices)),
                                    value=repr(value))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            whole = _hints(type(self))[f.name] in (int, int | None)
            kind = "a whole number" if whole else "a number"
            if not math.isfinite(value):
                raise SettingsError(f"{what} must be a finite number (got {value})", "settings.finite", what=what,
                                    value=value)
            lo, hi = k.minimum, k.maximum
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                range_key = ("whole_" if whole else "") + ("between" if lo is not None and hi is not None
                                                            else "min" if lo is not None else "max")
                if lo is not None and hi is not None:
                    span = f"from {_num(lo)} to {_num(hi)}" if whole else f"in [{_num(lo)}, {_num(hi)}]"
                elif lo is not None:
                    span = f">= {_num(lo)}"
                else:
                    span = f"<= {_num(hi)}"
                raise SettingsError(f"{what} must be {kind} {span} (got {value})", "settings.range_" + range_key,
                                    what=what, lo=_num(lo) if lo is not None else "",
                                    hi=_num(hi) if hi is not None else "", value=value)


def _what(f: dataclasses.Field) -> str:
    k = f.metadata.get("knob")
    return (k.what if k is not None and k.what else f.name.replace("_", " "))


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


_HINTS: dict[type, dict] = {}


def _hints(cls) -> dict:
    if cls not in _HINTS:
        import typing

        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(value, annotation, what: str):
    """A user or file value in the field's type: "2" or 2.0 for a whole number becomes 2, etc."""
    if isinstance(value, str) and annotation is not str and str not in getattr(annotation, "__args__", ()):
        text = value.strip()
        try:
            value = float(text) if text.lower() not in ("true", "false") else text.lower() == "true"
        except ValueError:
            raise SettingsError(f"{what} must be a number (got {value!r})", "settings.number", what=what,
                                value=repr(value)) from None
    whole = annotation in (int, int | None)
    if whole and isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise SettingsError(f"{what} must be a whole number (got {value})", "settings.whole", what=what,
                                value=value)
        value = int(value)
    try:
        return check_value(value, annotation, what)
    except PlainDataError as exc:
        raise ValueError(f"{what}: {str(exc).split(': ', 1)[-1]}") from None
