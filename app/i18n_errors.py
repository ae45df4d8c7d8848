"""A failure's message in the session's language: the engine's keyed exceptions
(`decoding.errors.Keyed`: a stable `key` and its `params` besides the English `str()`) and the app's own
errors made by `app_error`, rendered from the catalogs (`engine.<key>`, assets/i18n/<lang>/engine.yaml).

- a parameter that is itself an exception is rendered the same way (a detail inside a wider message:
  "line 3: <why>"); one without a key shows its English text;
- a parameter named `<name>_key` is a catalog key, rendered as the parameter `<name>` (a word that
  changes with the language, such as "p (target)");
- a parameter that is a function of the language is called with it (words the app makes itself);
- an exception without a key shows its English text (`message`), as before; in English every
  exception shows its own text (the catalog's English entries are the translators' reference: the
  engine words a few messages differently in the CLI and in the app, and both stay as they were).

`app/errors.py` calls `message` and `title` for the status line, in the language of the event being
handled (`i18n.current()`, set by `i18n.ui`); `decoding/` never imports this.
"""

from __future__ import annotations

import gradio as gr

from . import i18n

PREFIX = "engine."


def _param(value, lang: str | None):
    if isinstance(value, BaseException):
        return message(value, lang)
    if callable(value):  # words the app makes in a language (e.g. why a pair cannot run a method)
        return value(lang or i18n.current())
    return value


def what_words(what: str, lang: str | None) -> str:
    """How a message names a setting ("the KL bound D", "top-k": the engine's `what`) in `lang`: the catalog's
    `engine.what.<what, lower case, words joined by _>` where it has one, else as the engine says it."""
    key = PREFIX + "what." + "_".join(what.lower().replace("-", " ").split())
    return i18n.t(key, lang) if key in i18n.catalog(i18n.DEFAULT) else what


def params(raw: dict, lang: str | None) -> dict:
    """An exception's parameters in `lang`: nested exceptions rendered, `<name>_key` looked up, a
    setting's name (`what`) in words of the language."""
    out = {}
    for name, value in (raw or {}).items():
        if name.endswith("_key") and isinstance(value, str):
            out[name[:-len("_key")]] = i18n.t(PREFIX + value, lang)
        elif name == "what" and isinstance(value, str):
            out[name] = what_words(value, lang)
        else:
            out[name] = _param(value, lang)
    return out


def message(exc: BaseException, lang: str | None = None) -> str:
    """The user-facing text of `exc` in `lang` (None: the language of the event being handled,
    `i18n.current()`): its catalog text where it carries a key, else its own (English) text. A
    gr.Error made by `app_error` carries its key the same way."""
    lang = lang or i18n.current()
    key = getattr(exc, "key", None)
    own = str(exc.message) if isinstance(exc, gr.Error) else str(exc)
    if not key or i18n.normalize(lang) in (None, i18n.DEFAULT):
        return own  # English: the exception's own sentence, word for word as the CLI prints it
    return i18n.t(PREFIX + key, lang, **params(getattr(exc, "params", {}), lang))


def title(exc: BaseException, lang: str | None = None) -> str | None:
    """The status line's title of an `app_error` in `lang` (default: the current language); None: the
    caller's generic title."""
    key = getattr(exc, "title_key", None)
    return i18n.t(PREFIX + key, lang) if key else None


def app_error(key: str, title_key: str | None = None, /, **values) -> gr.Error:
    """A gr.Error whose message is the catalog text `engine.<key>` (English in `str()`, for API callers
    and logs) and whose title is `engine.<title_key>`; `values` (its parameters) may hold exceptions (rendered in the
    reader's language, `message`)."""
    english = i18n.t(PREFIX + key, i18n.DEFAULT, **params(values, i18n.DEFAULT))
    error = gr.Error(english, title=i18n.t(PREFIX + title_key, i18n.DEFAULT) if title_key else "Error")
    error.key, error.params, error.title_key = key, values, title_key
    return error


def has_key(exc: BaseException) -> bool:
    """Whether `exc` renders from the catalogs (tests list the user-reachable raises that do not)."""
    return bool(getattr(exc, "key", None))
