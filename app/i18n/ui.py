"""The page's language in Gradio: the session's language, the menu that changes it, and the chrome
re-rendered in place when it changes.

Mechanism:
- `Language` (one per Blocks, created by `begin` before the tabs are built) holds a gr.State with the
  session's language code (None until the page has loaded) and the header's menu (each language by
  its own name).
- Page load (`finish`): the language is `choose(?lang=, Accept-Language)`; the state, the menu and
  every registered chrome text take it, and the page's `<html lang>` follows (JS).
- Every event the app wires through `app.errors.on` (or `listen` here) gets the state as one more
  input, and its handler runs inside `i18n.using(lang)`, so renderers call `t(key)` with no
  language argument. Before the page's load event has set the state (None), the language comes
  from the request, by the same `choose`, so load events render in the page's language too.
- The menu: the state, the menu and the chrome change in one update, the `<html lang>` attribute and
  the address's `?lang=` follow (`history.replaceState`, the other query parameters kept, so a
  copied link opens in the same language), then every registered re-render (`on_change`) runs, each
  reading the session's own state (a loaded run, a shown race, the lab's table) and writing its
  outputs in the new language. Nothing is reset by it.

Chrome (`chrome(component, label="key", ...)`): a component property (label, info, value,
placeholder) whose text is a catalog key, or a function lang -> value for texts with parameters or
choices. The component is built with English and registered; the load and the menu update it.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable

import gradio as gr

from . import DEFAULT, LANGUAGES, choose, normalize, t, using

# the page's <html lang> follows the session's language; the menu also writes ?lang= into the address
# (the window's title follows the page's h1, which the same event has just translated)
SET_LANG_JS = """(lang) => {
  if (!lang) return;
  document.documentElement.lang = lang;
  const h1 = document.querySelector('#app-title h1');
  if (h1 && h1.innerText) document.title = h1.innerText;
}"""
SET_LANG_AND_ADDRESS_JS = """(lang) => {
  if (!lang) return;
  document.documentElement.lang = lang;
  const h1 = document.querySelector('#app-title h1');
  if (h1 && h1.innerText) document.title = h1.innerText;
  const url = new URL(window.location.href);
  url.searchParams.set('lang', lang);
  window.history.replaceState(window.history.state, '', url);
}"""
CHEAP = dict(queue=False, api_name=False, show_progress="hidden")
LANG_PARAM = "_lang"
LANG_REQUEST = "_lang_request"

_active: "Language | None" = None


def language_of(request) -> str:
    """The page's language from a request: `?lang=`, then Accept-Language, then English."""
    if request is None:
        return DEFAULT
    try:
        query = dict(request.query_params).get("lang")
        accept = (request.headers or {}).get("accept-language")
    except (AttributeError, TypeError):
        return DEFAULT
    return choose(query, accept)


def localized(fn: Callable) -> Callable:
    """`fn` as a handler taking the session's language first (the state's value) and the request
    last: it runs inside `using(lang)` (the request's language while the state is still None).
    Generators run each step inside it. The signature Gradio reads keeps `fn`'s own parameters."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())

    def lang_of(lang, request) -> str:
        return normalize(lang) or language_of(request)

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def handler(lang, *args):
            *args, request = args
            chosen = lang_of(lang, request)
            with using(chosen):
                steps = fn(*args)
            while True:
                with using(chosen):
                    try:
                        item = next(steps)
                    except StopIteration:
                        return
                yield item
    else:
        @functools.wraps(fn)
        def handler(lang, *args):
            *args, request = args
            with using(lang_of(lang, request)):
                return fn(*args)

    first = inspect.Parameter(LANG_PARAM, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    last = inspect.Parameter(LANG_REQUEST, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation=gr.Request)
    handler.__signature__ = sig.replace(parameters=[first, *params, last])
    handler.__annotations__ = {**getattr(fn, "__annotations__", {}), LANG_REQUEST: gr.Request}
    return handler


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple, set)) else [x]


@dataclass
class Language:
    """The session's language (`state`), the header's menu and what follows a change of language."""

    state: gr.State
    menu: gr.Dropdown | None = None
    texts: dict = field(default_factory=dict)  # component id -> (component, {prop: key or lang -> value})
    renders: list = field(default_factory=list)  # (fn, inputs, outputs, status or None, also on load)

    def chrome(self, component, **props):
        """Register texts of `component` (prop -> catalog key, or a function lang -> value)."""
        _, known = self.texts.setdefault(component._id, (component, {}))
        known.update(props)
        return component

    def chrome_updates(self, lang: str) -> list:
        with using(lang):
            return [gr.update(**{prop: (spec(lang) if callable(spec) else t(spec))
                                 for prop, spec in props.items()})
                    for _, props in self.texts.values()]

    def chrome_components(self) -> list:
        return [component for component, _ in self.texts.values()]


def begin() -> Language:
    """A new Language for the Blocks being built (call inside it, before the tabs): its state exists
    from here on, and `app.errors.on` passes it to every handler."""
    global _active
    _active = Language(gr.State(None))
    return _active


def active() -> Language | None:
    """The Language of the Blocks being built (None outside `begin` ... `finish`)."""
    return _active


def menu(**kwargs) -> gr.Dropdown:
    """The language menu (each language by its own name); call where it goes in the header."""
    lang = _active
    lang.menu = gr.Dropdown([(name, code) for code, name in LANGUAGES.items()], value=DEFAULT,
                            label=t("app.language", DEFAULT), elem_id="app-language", interactive=True,
                            **kwargs)
    return lang.menu


def chrome(component, **props):
    """Register `component`'s texts with the Blocks being built (no-op outside `begin`)."""
    return _active.chrome(component, **props) if _active is not None else component


def with_language(fn, inputs) -> tuple[Callable, list]:
    """(handler, inputs) of an event that renders text: the session's language added when a Language
    is being built, else `fn` and `inputs` unchanged."""
    if _active is None:
        return fn, _as_list(inputs)
    return localized(fn), [_active.state, *_as_list(inputs)]


def listen(trigger, fn, inputs, outputs, **kwargs):
    """`trigger(fn, inputs, outputs, **kwargs)` with the session's language (`with_language`), for
    events wired outside the error boundary."""
    fn, inputs = with_language(fn, inputs)
    return trigger(fn, inputs, outputs, **kwargs)


def on_change(fn, inputs, outputs, status=None, on_load: bool = False) -> None:
    """Re-render `outputs` with `fn(*inputs)` when the language changes (after the state holds the new
    language; `fn` runs in it). With `status`, through the app's error boundary. `on_load`: also once the
    page has loaded (for texts built in English that no load event of their own renders)."""
    if _active is not None:
        _active.renders.append((fn, inputs, outputs, status, on_load))


def finish(demo: gr.Blocks, on: Callable) -> Language:
    """Wire the page's load and the menu (call at the end of the Blocks); returns the Language. `on` is
    the app's error boundary (`app.errors.on`, which imports this module: the caller hands it in), through
    which the re-renders that have a status line are wired."""
    global _active
    lang, _active = _active, None

    outputs = [lang.state, lang.menu, *lang.chrome_components()]

    def apply(code, request: gr.Request = None):
        chosen = normalize(code) or language_of(request)
        return (chosen, gr.update(value=chosen, label=t("app.language", chosen)), *lang.chrome_updates(chosen))

    def on_load(request: gr.Request = None):
        return apply(None, request)

    loaded = demo.load(on_load, None, outputs, **CHEAP)
    loaded.then(None, lang.menu, None, js=SET_LANG_JS, **CHEAP)  # a State has no value in the browser
    changed = lang.menu.input(apply, lang.menu, outputs, **CHEAP)
    changed.then(None, lang.menu, None, js=SET_LANG_AND_ADDRESS_JS, **CHEAP)
    _active = lang  # so that `on` below adds the state to the re-renders' inputs
    try:
        for fn, inputs, outs, status, at_load in lang.renders:
            for event in (changed, loaded) if at_load else (changed,):
                if status is not None:
                    on(event.then, fn, inputs, outs, status, clear=False, **CHEAP)
                else:
                    listen(event.then, fn, inputs, outs, **CHEAP)
    finally:
        _active = None
    return lang
