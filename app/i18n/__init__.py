"""The interface in the class's language: catalogs of interface strings, the language a page is
shown in, and the one function every reader calls, `t(key, lang, **params)`.

- catalogs  `assets/i18n/<lang>/<area>.yaml` (area: common, lesson, explainer, race, lab, engine, ...),
            each one flat mapping key -> text, merged per language (a key in two files is an error);
            a text may hold `{name}` placeholders (str.format). English (`en/`) holds every key; the
            other languages must hold the same keys with the same placeholders
            (tests/app/test_i18n.py).
            The papers' symbols stay as they are in every language: p, q, γ, α, τ, l, u.
- languages `LANGUAGES`: code -> the language's own name, in the order the language menu lists them.
- choosing  `choose(query, accept_language)`: `?lang=xx` wins, then the browser's Accept-Language,
            then English.
- missing   a key missing in a language falls back to English and is recorded in `missing()`, logged
            once per key; a test renders every tab in every language and fails on any record
            (`strict(True)` raises instead, for tests that want the first miss as an error).

- current   `using(lang)` sets the language of the event being handled (a context variable, per thread and
            per task); `t(key)` without a language reads it. The app's error boundary (`app.errors.on`)
            passes each session's language to every handler this way (`app/i18n/ui.py`), so renderers
            call `t(key)` and never thread a language argument through.

The page's chrome (labels, buttons, tab names, intros) is re-rendered from the same catalogs when the
language changes (`app/i18n/ui.py`); `gradio_i18n()` hands the catalogs to Gradio's own `gr.I18n`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import string
from functools import lru_cache
from pathlib import Path

import yaml

from decoding.paths import ASSETS

CATALOGS = ASSETS / "i18n"
DEFAULT = "en"
LANGUAGES = {"en": "English", "es": "Español", "fr": "Français", "zh": "简体中文"}

_log = logging.getLogger(__name__)
_missing: set[tuple[str, str]] = set()
_strict = False
_current: contextvars.ContextVar[str] = contextvars.ContextVar("specdec_lang", default=DEFAULT)


class MissingTranslation(KeyError):
    """A key a catalog lacks (raised in strict mode only; otherwise English is shown and recorded)."""


@lru_cache(maxsize=None)
def catalog(lang: str) -> dict[str, str]:
    """The flat key -> text mapping of `lang`, all its area files merged (empty where the language has
    no folder)."""
    merged: dict[str, str] = {}
    for path in sorted((Path(CATALOGS) / lang).glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise ValueError(f"{lang}/{path.name}: a catalog is one flat mapping of keys to texts")
        twice = sorted(set(data) & set(merged))
        if twice:
            raise ValueError(f"{lang}/{path.name}: keys already in another file: {', '.join(twice)}")
        merged.update(data)
    return merged


def normalize(code: str | None) -> str | None:
    """A language code as the catalogs name it ('es-MX' -> 'es', 'zh-Hans-CN' -> 'zh'), or None
    where the app has no such language."""
    if not code:
        return None
    base = code.strip().replace("_", "-").split("-")[0].lower()
    return base if base in LANGUAGES else None


def choose(query: str | None = None, accept_language: str | None = None) -> str:
    """The page's language: `?lang=` if the app has it, else the first of the browser's
    Accept-Language entries it has (by their q weights), else English."""
    chosen = normalize(query)
    if chosen:
        return chosen
    weighted = []
    for i, part in enumerate((accept_language or "").split(",")):
        code, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        weighted.append((-q, i, code))
    for _, _, code in sorted(weighted):
        if normalize(code):
            return normalize(code)
    return DEFAULT


def current() -> str:
    """The language of the event being handled (English outside any `using`)."""
    return _current.get()


@contextlib.contextmanager
def using(lang: str | None):
    """Within the block, `t(key)` without a language gives `lang`'s text (an unknown code: English)."""
    token = _current.set(normalize(lang) or DEFAULT)
    try:
        yield
    finally:
        _current.reset(token)


def t(key: str, lang: str | None = None, /, **params) -> str:
    """The text of `key` in `lang` (None: `current()`) with `params` filled in; English where `lang`
    lacks it (recorded, see `missing`). An unknown key is a programming error and always raises."""
    lang = normalize(lang or _current.get()) or DEFAULT
    text = catalog(lang).get(key)
    if text is None:
        english = catalog(DEFAULT).get(key)
        if english is None:
            raise MissingTranslation(f"no English text for {key!r} in {CATALOGS.name}/{DEFAULT}/")
        if _strict:
            raise MissingTranslation(f"{lang}/ lacks {key!r}")
        if (lang, key) not in _missing:
            _missing.add((lang, key))
            _log.warning("i18n: %s/ lacks %r; showing English", lang, key)
        text = english
    return text.format(**params) if params else text


def placeholders(text: str) -> set[str]:
    """The `{name}` placeholders of a catalog text."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def missing() -> set[tuple[str, str]]:
    """(language, key) pairs shown in English since the process started (or since `reset_missing`)."""
    return set(_missing)


def record_missing(lang: str, key: str) -> None:
    """Record (and log once) a text shown in English because `lang` lacks it, for texts kept outside
    the catalogs (the lesson's chapters: key "lesson.<chapter id>.<field>", `app.lesson.languages`)."""
    if (lang, key) not in _missing:
        _missing.add((lang, key))
        _log.warning("i18n: %s lacks %r; showing English", lang, key)


def reset_missing() -> None:
    _missing.clear()


def strict(on: bool) -> None:
    """Raise on a missing translation instead of falling back (tests)."""
    global _strict
    _strict = on


def gradio_i18n():
    """Gradio's own I18n from the catalogs, for component labels (`demo.launch(i18n=...)`)."""
    import gradio as gr

    return gr.I18n(**{lang: catalog(lang) for lang in LANGUAGES})
