"""The model pairs' names in the page's language. A pair's English label stays its value (what
handlers, links and saved settings read); the menu shows its translation, `explainer.pair.<n>` in
the catalogs, found by the English label. A pair without a translation shows its English label and
is recorded as missing (`i18n.missing`), like any catalog text."""

from __future__ import annotations

from .i18n import DEFAULT, catalog, current, normalize, record_missing

PREFIX = "explainer.pair."


def _keys() -> dict[str, str]:
    """English label -> catalog key of every translated pair name."""
    return {text: key for key, text in catalog(DEFAULT).items() if key.startswith(PREFIX)}


def pair_label(label: str, lang: str | None = None) -> str:
    """`label` (a pair's English name) as the menu shows it in `lang` (the current language if None)."""
    lang = normalize(lang) or current()
    if lang == DEFAULT:
        return label
    key = _keys().get(label)
    if key is None:
        record_missing(lang, PREFIX + label)
        return label
    text = catalog(lang).get(key)
    if text is None:
        record_missing(lang, key)
        return label
    return text


def pair_choices(labels, lang: str | None = None) -> list[tuple[str, str]]:
    """The menu's (shown name, value) pairs: each name in `lang`, each value its English label."""
    return [(pair_label(label, lang), label) for label in labels]
