"""The interface catalogs (app/i18n): every language holds every English key with the same
placeholders, the page's language is chosen as documented, and a missing text is recorded."""

import pytest

from app import i18n


@pytest.mark.parametrize("lang", [code for code in i18n.LANGUAGES if code != i18n.DEFAULT])
def test_every_language_holds_every_key_with_its_placeholders(lang):
    english, other = i18n.catalog("en"), i18n.catalog(lang)
    assert sorted(set(english) - set(other)) == [], f"{lang}/ lacks these keys"
    assert sorted(set(other) - set(english)) == [], f"{lang}/ has keys English lacks"
    wrong = [k for k in english if i18n.placeholders(english[k]) != i18n.placeholders(other[k])]
    assert wrong == [], f"{lang}/: placeholders differ from English in these keys"


@pytest.mark.parametrize("query, accept, expected", [
    ("fr", "es-ES,es;q=0.9", "fr"),
    (None, "es-ES,es;q=0.9,en;q=0.8", "es"),
    (None, "de-DE,de;q=0.9,zh-CN;q=0.8", "zh"),
    (None, "en;q=0.5,fr;q=0.9", "fr"),
    ("xx", None, "en"),
    (None, None, "en"),
    ("zh-Hans", None, "zh"),
])
def test_the_page_language_is_chosen_from_the_query_then_the_browser(query, accept, expected):
    assert i18n.choose(query, accept) == expected


def test_a_missing_text_falls_back_to_english_and_is_recorded(monkeypatch):
    i18n.reset_missing()
    monkeypatch.setitem(i18n.catalog("en"), "test.only.english", "Only {what}")
    assert i18n.t("test.only.english", "es", what="this") == "Only this"
    assert ("es", "test.only.english") in i18n.missing()
    i18n.strict(True)
    try:
        with pytest.raises(i18n.MissingTranslation):
            i18n.t("test.only.english", "fr", what="x")
    finally:
        i18n.strict(False)
        i18n.reset_missing()


def test_an_unknown_key_is_an_error():
    with pytest.raises(i18n.MissingTranslation):
        i18n.t("no.such.key", "en")


@pytest.mark.parametrize("lang", [code for code in i18n.LANGUAGES if code != i18n.DEFAULT])
def test_every_model_pair_has_its_name_in_every_language(lang):
    from app.preset_labels import pair_choices
    from app.presets import presets

    i18n.reset_missing()
    labels = [p.label for p in presets()]
    shown = pair_choices(labels, lang)
    assert [value for _, value in shown] == labels  # the values stay the English names
    assert i18n.missing() == set(), "pairs without a name in this language"
    assert all(name != value for name, value in shown)
