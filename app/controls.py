"""The run controls of the app, derived from the method registry.

The common controls (prompt, method, gamma, lenience, sampling, seed, max new tokens) are fixed;
every method knob marked `app=True` in a settings dataclass becomes one control (a slider, a
checkbox for a switch, a dropdown for a named choice) with the knob's label, range and app default, shown only while a method
that uses it is selected. The handlers' signatures (and so the api's parameter names) are built
from the same list, so adding a setting to a method adds its control, its api parameter, its
server-side check and its "copy as CLI command" flag at once.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass

import gradio as gr

from decoding.methods.settings import SAME, Knob
from decoding.methods.registry import METHODS

# The api order of a run's inputs (kept for clients that call positionally), around the method knobs.
COMMON_INPUTS = ("preset", "custom_target", "custom_draft", "prompt", "chat", "method", "gamma", "temperature",
                 "top_k", "top_p", "lenience", "seed", "max_new_tokens", "dtype")
# The order in which `controls_from_settings` returns values (the left-hand column, top to bottom).
CONTROLS_BEFORE = ("prompt", "chat", "method", "gamma", "lenience")
CONTROLS_AFTER = ("temperature", "top_k", "top_p", "seed", "max_new_tokens", "dtype")
# The Explainer's starting values of the common run controls (the layout builds them with these; a
# lesson chapter's "Run it live" starts from them too). Method knobs start at their app defaults.
DEFAULTS = {"method": "speculative", "gamma": 4, "lenience": 1.0, "temperature": 0.7, "top_k": 0, "top_p": 1.0,
            "seed": 0, "max_new_tokens": 48, "dtype": "auto", "pacing": 0.3}


@dataclass(frozen=True)
class MethodControl:
    """One app control for a method knob (shared by every method that declares the same knob)."""

    name: str  # the control's api name
    field: str  # the settings field it fills
    knob: Knob
    kind: type  # int, float or bool
    default: object
    methods: tuple[str, ...]


def method_controls(methods: dict | None = None) -> list[MethodControl]:
    """Every method knob shown in the app, in registry order, one per name."""
    found: dict[str, MethodControl] = {}
    for spec in (METHODS if methods is None else methods).values():
        hints = typing.get_type_hints(spec.settings)
        for f, k in spec.settings.knobs():
            if not k.app:
                continue
            name = k.app_name or f.name
            if name in found:
                found[name] = dataclasses.replace(found[name], methods=found[name].methods + (spec.name,))
                continue
            kind = hints[f.name]
            kind = next((t for t in (bool, int, float, str) if kind is t or t in typing.get_args(kind)), float)
            default = f.default if k.app_default is SAME else k.app_default
            found[name] = MethodControl(name, f.name, k, kind, default, (spec.name,))
    return list(found.values())


def control_order(methods: dict | None = None) -> tuple[str, ...]:
    """The controls whose values `controls_from_settings` returns, in order."""
    return CONTROLS_BEFORE + tuple(c.name for c in method_controls(methods)) + CONTROLS_AFTER


CONTROL_ORDER = control_order()  # of the registry as shipped


def run_input_names(methods: dict | None = None, method_inputs: tuple[str, ...] = ("method",)) -> tuple[str, ...]:
    """The api parameter names of a run's inputs (after the session), in order; `method_inputs`
    replaces the one method input (the side-by-side tab has two)."""
    common = []
    for name in COMMON_INPUTS:
        common += list(method_inputs) if name == "method" else [name]
    return tuple(common) + tuple(c.name for c in method_controls(methods))


def knob_text(name: str, prop: str, english: str, lang: str | None = None) -> str:
    """A method knob's label or help line in `lang`: the catalog's `explainer.knob.<name>.<prop>` where it
    has one, else the knob's own (English) text, so a new method's knob shows before it is translated."""
    from .i18n import catalog, t

    key = f"explainer.knob.{name}.{prop}"
    return t(key, lang) if english and key in catalog("en") else english


def build_method_controls(method: str, methods: dict | None = None) -> dict[str, gr.components.Component]:
    """The method knobs' components (call inside a Blocks context); visible for `method`'s knobs. Their
    label and help line follow the page's language (`i18n.ui.chrome`, `knob_text`)."""
    from .i18n.ui import chrome

    out = {}
    for c in method_controls(methods):
        visible = method in c.methods
        k = c.knob
        label, info = knob_text(c.name, "label", k.label, "en"), knob_text(c.name, "info", k.info, "en") or None
        if c.kind is bool:
            out[c.name] = gr.Checkbox(value=bool(c.default), label=label, visible=visible, info=info)
        elif c.kind is str:  # a choice among named values (e.g. the gamma schedule)
            out[c.name] = gr.Dropdown(list(k.choices), value=c.default, label=label, visible=visible, info=info,
                                      allow_custom_value=k.open_choices)
        else:
            lo = k.minimum if k.minimum is not None else 0
            hi = k.ui_maximum if k.ui_maximum is not None else (k.maximum if k.maximum is not None else 1)
            step = k.step if k.step is not None else (1 if c.kind is int else 0.01)
            value = c.default if c.default is not None else lo
            out[c.name] = gr.Slider(lo, hi, value=value, step=step, label=label, visible=visible)
        texts = {"label": lambda lang, n=c.name, e=k.label: knob_text(n, "label", e, lang)}
        if info:
            texts["info"] = lambda lang, n=c.name, e=k.info: knob_text(n, "info", e, lang)
        chrome(out[c.name], **texts)
    return out


def visible_for(method: str, methods: dict | None = None) -> set[str]:
    """The names of the controls a method uses (gamma and lenience included when it uses them)."""
    methods = METHODS if methods is None else methods
    spec = methods.get(method)
    if spec is None:
        return {"gamma"}
    names = {c.name for c in method_controls(methods) if method in c.methods}
    if spec.uses_gamma:
        names.add("gamma")
    if spec.uses_lenience:
        names.add("lenience")
    return names


def default_values(methods: dict | None = None) -> tuple:
    """The controls' starting values, in `control_order` (gr.skip() for the prompt and the chat
    template, which keep what the user typed)."""
    knobs = {c.name: c.default for c in method_controls(methods)}
    values = {**DEFAULTS, **knobs}
    return tuple(values[name] if name in values else gr.skip() for name in control_order(methods))


def controls_from_settings(settings, methods: dict | None = None) -> tuple:
    """The controls' values for a run's Settings (in `control_order`); gr.skip() for what the run
    did not set (its method's knobs keep their values for the others)."""
    order = control_order(methods)
    if settings is None:
        return tuple(gr.skip() for _ in order)
    from .settings import MAX_GAMMA, MAX_NEW_TOKENS

    s = settings
    values = {"prompt": s.prompt, "chat": s.chat, "method": s.method, "gamma": min(max(s.gamma, 1), MAX_GAMMA),
              "lenience": s.lenience, "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
              "seed": s.seed, "max_new_tokens": min(max(s.max_new_tokens, 1), MAX_NEW_TOKENS),
              "dtype": getattr(s, "dtype", None)}
    extra = s.extra or {}
    for c in method_controls(methods):
        if s.method not in c.methods:
            continue
        value = next((extra[n] for n in (c.field, c.name, *(a.lstrip("-").replace("-", "_") for a in c.knob.aliases))
                      if n in extra), None)
        if value is None and c.knob.auto is not None:
            value = c.knob.auto  # the run decided it automatically: show the control's "auto" value
        values[c.name] = value
    return tuple(gr.skip() if values.get(name) is None else values[name] for name in order)


def with_run_inputs(extra: tuple[str, ...] = (), methods: dict | None = None,
                    method_inputs: tuple[str, ...] = ("method",)):
    """Decorate `fn(session, values: dict, progress)` into the positional handler Gradio calls:
    `(session, <run inputs>, <extra>, progress=gr.Progress())`, whose parameter names are the api's."""
    names = run_input_names(methods, method_inputs) + tuple(extra)
    params = [inspect.Parameter("session", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    params.append(inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=gr.Progress()))
    signature = inspect.Signature(params)

    def decorate(fn):
        def split(args):
            *values, progress = args if len(args) == len(names) + 1 else (*args, None)
            return dict(zip(names, values)), progress

        if inspect.isgeneratorfunction(fn):
            def handler(session, *args):
                values, progress = split(args)
                yield from fn(session, values, progress)
        else:
            def handler(session, *args):
                values, progress = split(args)
                return fn(session, values, progress)
        functools.update_wrapper(handler, fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"),
                                 updated=())
        handler.__signature__ = signature
        handler.input_names = names
        return handler

    return decorate
