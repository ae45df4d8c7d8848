"""The page's language on the server (app/i18n/ui.py): handlers run in the session's language (the
request's before the page has loaded), the chrome updates name every registered text, and the Lesson's
chrome, the Race tab and the Exactness lab render in every language with no English fallback
recorded and no text left as the English one (but the short allow list below, each entry justified)."""

import re

import gradio as gr
import pytest
import yaml
from app import i18n
from app.i18n import ui

from _i18n import MY_AREAS, SAME_AS_ENGLISH


def english_of(area: str) -> dict[str, str]:
    return yaml.safe_load((i18n.CATALOGS / "en" / f"{area}.yaml").read_text(encoding="utf-8"))


def my_keys() -> list[str]:
    return [key for area in MY_AREAS for key in english_of(area)]


@pytest.mark.parametrize("lang", [c for c in i18n.LANGUAGES if c != i18n.DEFAULT])
def test_no_text_of_these_tabs_is_left_in_english(lang):
    english, other = i18n.catalog("en"), i18n.catalog(lang)
    allowed = SAME_AS_ENGLISH["*"] | SAME_AS_ENGLISH[lang]
    same = sorted(k for k in my_keys() if other.get(k) == english[k] and k not in allowed)
    assert same == [], f"{lang}/ keeps the English text of these keys"


def test_the_allow_list_names_only_keys_that_exist():
    keys = set(my_keys())
    for lang, allowed in SAME_AS_ENGLISH.items():
        assert allowed <= keys, f"{lang}: unknown keys in the allow list: {sorted(allowed - keys)}"


def test_the_papers_symbols_stay_in_every_language():
    """γ, α, p, q keep their symbols: a text that names one in English names it in every language."""
    for key in my_keys():
        for symbol in ("γ", "α", "Σ", "TV("):
            if symbol in i18n.catalog("en")[key]:
                for lang in i18n.LANGUAGES:
                    assert symbol in i18n.catalog(lang)[key], f"{lang}/{key} lost {symbol}"


class FakeRequest:
    def __init__(self, query=None, accept=None):
        self.query_params = {"lang": query} if query else {}
        self.headers = {"accept-language": accept} if accept else {}


def test_a_handler_runs_in_the_sessions_language_else_the_requests():
    seen = []
    handler = ui.localized(lambda x: seen.append((x, i18n.current())) or x)
    assert handler("fr", 1, FakeRequest("es")) == 1  # the session's state wins
    handler(None, 2, FakeRequest(None, "zh-CN,zh;q=0.9"))  # before load: the browser's language
    handler(None, 3, FakeRequest("es", "fr"))  # before load: ?lang= over the browser
    handler(None, 4, None)
    assert seen == [(1, "fr"), (2, "zh"), (3, "es"), (4, "en")]
    assert i18n.current() == "en"  # nothing leaks out of the event


def test_a_generator_handler_runs_each_step_in_the_language():
    def steps(n):
        for i in range(n):
            yield i18n.t("lab.sample")

    handler = ui.localized(steps)
    assert list(handler("es", 2, None)) == [i18n.t("lab.sample", "es")] * 2
    assert i18n.current() == "en"


def test_the_signature_gradio_reads_has_the_language_first_and_the_request_last():
    import inspect

    def fn(a, b=1, progress=gr.Progress()):
        return a

    params = list(inspect.signature(ui.localized(fn)).parameters)
    assert params == [ui.LANG_PARAM, "a", "b", "progress", ui.LANG_REQUEST]


@pytest.fixture(scope="module")
def demo():
    from app.layout import build_demo

    return build_demo()


def test_the_page_has_one_language_menu_and_every_tab_registers_its_chrome(demo):
    menus = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "app-language"]
    assert len(menus) == 1 and [c[1] for c in menus[0].choices] == list(i18n.LANGUAGES)
    assert [c[0] for c in menus[0].choices] == list(i18n.LANGUAGES.values())  # each by its own name
    tabs = [b for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    labels = {b.label for b in tabs}
    assert labels == {i18n.t(k, "en") for k in ("common.tab.lesson", "common.tab.explainer", "common.tab.lab",
                                                   "common.tab.race")}


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_every_tab_of_mine_renders_in_each_language_with_no_fallback(lang):
    """Render what the Lesson's chrome (every chapter), the Race tab and the lab show, in `lang`: no English
    fallback is recorded, and each rendered text holds no English sentence of these tabs' catalogs."""
    from decoding.rules.implementations import IMPLEMENTATIONS
    from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB

    from app.lab.events import implementation_words, lab_run, lab_table
    from app.lesson import tab as lesson_tab
    from app.race.handlers import race_in_language, race_on_load

    i18n.reset_missing()
    shown: list[str] = []
    with i18n.using(lang):
        table = [[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)]
        *_, md = lab_run(table, 1.0, 1000, 0)
        shown.append(md)
        shown += [implementation_words(name) for name in IMPLEMENTATIONS]
        shown += list(lab_table(table).columns)
        for name in IMPLEMENTATIONS:
            if name != "correct":
                shown.append(lab_run(table, 1.0, 1000, 0, name)[-1])
        loaded = race_on_load()
        value, figures = loaded[1], loaded[2]
        again, figures2, note = race_in_language(value, figures, loaded[0])
        shown += [again["result"], note, *again["words"].values()]
        chapters = lesson_tab.chapters_now()
        for i in range(len(chapters)):  # the chrome around each chapter (its words are the lesson files')
            view = lesson_tab.chapter_view(chapters, i)
            prose = [chapters[i].try_label, chapters[i].question.why, *chapters[i].question.choices]
            chrome = [view[3], view[10]["value"], view[20]["value"],
                      lesson_tab.feedback_text(chapters, i, chapters[i].question.choices[0])]
            for words in prose:  # the chapter's own words (41b's lesson files) are not this test's
                chrome = [str(c).replace(words, "") for c in chrome]
            shown += chrome
            if chapters[i].widget["kind"] != "trace":  # a trace's panel is the Explainer's renderer (render.py)
                shown.append(view[13])
    assert not {(lg, k) for lg, k in i18n.missing() if k.split(".")[0] in ("common", "lesson", "race", "lab",
                                                                         "player", "app")}, i18n.missing()
    if lang == i18n.DEFAULT:
        return
    english = i18n.catalog("en")
    allowed = SAME_AS_ENGLISH["*"] | SAME_AS_ENGLISH[lang]
    # whole English texts (no placeholder, two words or more) that must not appear in another language's page
    sentences = {english[k] for k in my_keys() if k not in allowed and "{" not in english[k]
                 and len(english[k].split()) >= 2}
    text = "\n".join(str(s) for s in shown)
    found = sorted(s for s in sentences if s in text)
    assert found == [], f"English texts shown in {lang}: {found}"
