"""The lesson in every language (app/lesson/languages.py): each language file passes the validator
against the English lesson, renders every chapter with its placeholders resolved and nothing shown in
English, and keeps English's answers and settings; the validator refuses a missing or extra chapter,
a changed, dropped or added placeholder, a typed number, a missing field and any setting."""

import copy
import re
import unittest.mock as mock

import pytest
import yaml

from _student_text import dev_hits
from app import i18n
from app.controls import control_order
from app.lesson import content, languages
from app.lesson.content import LESSON_FILE

ENGLISH = yaml.safe_load(LESSON_FILE.read_text(encoding="utf-8"))
EN = content.load(live_keys=control_order())
TRANSLATED = [lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT]


def _file(lang):
    return yaml.safe_load(languages.language_file(lang).read_text(encoding="utf-8"))


def _problems(data, lang="es", english=ENGLISH):
    return languages.check_language(english, data, lang)[1]


def test_every_language_has_a_lesson_file():
    assert TRANSLATED == ["es", "fr", "zh"]
    for lang in TRANSLATED:
        assert languages.language_file(lang).name == f"lesson.{lang}.yaml"
    assert languages.language_file("en") == LESSON_FILE


@pytest.mark.parametrize("lang", TRANSLATED)
def test_each_language_file_passes_the_validator(lang):
    words, problems = languages.check_language(ENGLISH, _file(lang), lang)
    assert problems == []
    assert list(words) == [ch.id for ch in EN]  # every chapter, and no other
    assert all(set(fields) == set(languages.FIELDS) for fields in words.values())


@pytest.mark.parametrize("lang", TRANSLATED)
def test_each_language_renders_every_chapter_with_no_english_fallback(lang):
    from app.lesson import tab as lesson_tab

    i18n.reset_missing()
    chapters, problem = lesson_tab.load_chapters(lang)
    assert problem == "" and len(chapters) == len(EN)
    for i, (ch, en) in enumerate(zip(chapters, EN)):
        view = lesson_tab.chapter_view(chapters, i)
        shown = " ".join(str(part) for part in view[3:8]) + " " + " ".join(view[8]["choices"])
        assert "{" not in shown and "}" not in shown, (lang, ch.id)
        assert ch.title in view[5] and ch.text == view[6]
        # the words are the language's, not English's (a choice that is only a figure reads the same)
        assert ch.title != en.title and ch.text != en.text and ch.try_label != en.try_label, (lang, ch.id)
        assert ch.question.ask != en.question.ask and ch.question.why != en.question.why, (lang, ch.id)
        # structure and answers are English's: the same choice is right, the same settings are used
        assert ch.id == en.id and ch.question.answer == en.question.answer
        assert len(ch.question.choices) == len(en.question.choices)
        assert (ch.widget, ch.try_set, ch.reveal, ch.live) == (en.widget, en.try_set, en.reveal, en.live)
        right = ch.question.choices[ch.question.answer]
        assert lesson_tab.feedback_text(chapters, i, right).startswith("**Correct.**")
        raw = ENGLISH["chapters"][i]["question"]["choices"]
        for ours, theirs, written in zip(ch.question.choices, en.question.choices, raw):
            if content.PLACEHOLDER.fullmatch(written):  # a choice that is one figure reads the same everywhere
                assert ours == theirs, (lang, ch.id, ours)
        assert dev_hits(" ".join([ch.title, ch.text, ch.try_label, ch.question.ask, *ch.question.choices,
                                  ch.question.why])) == [], (lang, ch.id)
    assert [key for key in i18n.missing() if key[1].startswith("lesson.")] == []


def test_english_is_the_lesson_itself_and_an_unknown_language_gets_english():
    assert [c.title for c in languages.load_lesson("en")] == [c.title for c in EN]
    assert [c.text for c in languages.load_lesson("xx")] == [c.text for c in EN]
    assert [c.text for c in languages.load_lesson(None)] == [c.text for c in EN]
    assert languages.load_lesson("es-MX")[0].title == languages.load_lesson("es")[0].title != EN[0].title


def test_a_missing_chapter_is_named_by_number_id_and_english_title():
    data = _file("es")
    del data["chapters"]["ppd"]
    assert _problems(data) == ["lesson.es.yaml lacks chapter 10 (ppd: 'PPD, the target guesses ahead'); "
                               "translate it from lesson.yaml"]
    # a chapter added to the English lesson (issue 42's token trees, say) is named the same way
    english = copy.deepcopy(ENGLISH)
    english["chapters"].append({**copy.deepcopy(ENGLISH["chapters"][9]), "id": "token-trees", "title": "Token trees"})
    number = len(english["chapters"])
    for lang in TRANSLATED:
        assert _problems(_file(lang), lang, english) == [
            f"lesson.{lang}.yaml lacks chapter {number} (token-trees: 'Token trees'); translate it from lesson.yaml"]


def test_a_chapter_english_lacks_and_a_file_without_chapters_are_refused():
    data = _file("fr")
    data["chapters"]["bogus"] = copy.deepcopy(data["chapters"]["ppd"])
    problems = _problems(data, "fr")
    assert len(problems) == 1 and "lesson.fr.yaml has a chapter 'bogus' that the English lesson lacks" in problems[0]
    assert _problems({"chapters": []}) == ["lesson.es.yaml needs chapters: a mapping of chapter ids "
                                           "(as in lesson.yaml) to their words"]
    assert "lesson.es.yaml: language is not part" in _problems({**_file("es"), "language": "es"})[0]


@pytest.mark.parametrize("field, old, new, needle", [
    ("why", "{lab.q(token=is)}", "{lab.q(token=stock)}", "lacks {lab.q(token=is)} and adds {lab.q(token=stock)}"),
    ("why", "{lab.reject_chance(token=is)}", "", "its placeholders differ from the English: it lacks "
                                                 "{lab.reject_chance(token=is)}"),
    ("ask", "**is**", "**is** ({lab.alpha})", "adds {lab.alpha}"),
    ("why", "{lab.keep_chance(token=is)},", "{lab.keep_chance(token=is},", "a brace outside a placeholder"),
    ("text", "p = 0.4, 0.3", "p = 0.4, 0.35", "its typed numbers differ from the English: it lacks 3 and adds 35"),
    ("why", "nunca se rechaza", "se rechaza con probabilidad 0.2",
     "typed numbers differ from the English: it adds 0, 2"),
])
def test_a_changed_placeholder_or_a_typed_number_is_refused(field, old, new, needle):
    data = _file("es")
    ch = data["chapters"]["guess-and-verify"]
    where = ch if field in ("text", "title") else ch["question"]
    assert old in where[field]
    where[field] = where[field].replace(old, new)
    problems = _problems(data)
    assert problems and all(p.startswith("lesson.es.yaml chapter 2 (guess-and-verify): ") for p in problems)
    assert any(needle in p for p in problems), problems


def test_numbers_may_follow_the_languages_separators_but_not_change():
    assert languages._numbers("100,000 y 200") == languages._numbers("100.000 y 200") == \
        languages._numbers("100 000 et 200")
    assert languages._numbers("0.4") == languages._numbers("0,4") != languages._numbers("0.45")
    assert languages._numbers("{theory.tokens_per_call(alpha=0.8, gamma=4)} γ = 4") == languages._numbers("γ = 4")


def test_settings_and_answers_cannot_be_translated():
    data = _file("zh")
    ch = data["chapters"]["residual"]
    ch["widget"] = {"kind": "lab", "n": 5}
    ch["live"] = {"gamma": 8}
    ch["question"]["answer"] = ch["question"]["choices"][0]
    problems = "\n".join(_problems(data, "zh"))
    assert "lesson.zh.yaml chapter 3 (residual): live, widget cannot be translated" in problems
    assert "question.answer cannot be translated (which choice is right comes from the English lesson" in problems
    data = _file("zh")
    data["chapters"]["residual"]["try"] = {"label": "试一试", "set": {"n": 5}}
    assert "try is the Try this button's label only" in "\n".join(_problems(data, "zh"))


def test_a_missing_field_or_a_choice_list_of_another_length_is_refused():
    data = _file("fr")
    del data["chapters"]["lenience"]["text"]
    data["chapters"]["mentored"]["question"]["choices"].pop()
    data["chapters"]["mjsd"]["title"] = "  "
    data["chapters"]["ppd"]["question"]["choices"][0] = data["chapters"]["ppd"]["question"]["choices"][1]
    data["chapters"]["draft-positions"]["text"] = "mot " * (languages.TRANSLATED_MAX_WORDS + 1)
    problems = "\n".join(_problems(data, "fr"))
    for needle in ("chapter 7 (lenience) lacks text", "chapter 8 (mentored): question.choices must be a list of "
                   "3 choices, in the English order", "chapter 9 (mjsd): title is empty or not text",
                   "chapter 10 (ppd): question.choices 1: its placeholders differ",
                   f"chapter 12 (draft-positions): text has {languages.TRANSLATED_MAX_WORDS + 1} words"):
        assert needle in problems, (needle, problems)


def test_a_field_a_language_lacks_or_gets_wrong_shows_english_and_is_recorded():
    data = _file("es")
    data["chapters"]["guess-and-verify"]["question"]["why"] += " 0.2"  # a typed number: refused
    del data["chapters"]["ppd"]  # a whole chapter missing
    i18n.reset_missing()
    chapters, fallbacks = languages.translate(EN, ENGLISH, data, "es")
    assert chapters[1].question.why == EN[1].question.why and chapters[1].question.ask != EN[1].question.ask
    assert chapters[9].title == EN[9].title and chapters[9].question.choices == EN[9].question.choices
    assert set(fallbacks) == {"lesson.guess-and-verify.question.why",
                              *(f"lesson.ppd.{field}" for field in languages.FIELDS)}
    # load_lesson records each fallback in app.i18n's missing texts, every time it is asked
    languages._load.cache_clear()
    try:
        with mock.patch.object(languages, "_read", return_value=data):
            i18n.reset_missing()
            languages.load_lesson("es")
            first = i18n.missing()
            i18n.reset_missing()
            languages.load_lesson("es")
            assert i18n.missing() == first == {("es", key) for key in fallbacks}
    finally:
        languages._load.cache_clear()
        i18n.reset_missing()


def test_chapter_ids_are_given_unique_and_default_to_the_title():
    assert [ch.id for ch in EN][:3] == ["one-token-per-pass", "guess-and-verify", "residual"]
    assert content.chapter_id({"title": "Token trees: a draft's branches"}) == "token-trees-a-draft-s-branches"
    data = copy.deepcopy(ENGLISH)
    data["chapters"][1]["id"] = "one-token-per-pass"
    data["chapters"][2]["id"] = "Not An Id"
    errors = content.validate(data, control_order())[1]
    assert "chapter 2: id 'one-token-per-pass' is chapter 1's too; each chapter needs its own id" in errors
    assert "chapter 3: its id 'Not An Id' must be lowercase letters, digits and dashes (id: my-chapter)" in errors


def test_chinese_line_breaks_inside_a_paragraph_are_taken_out():
    assert languages.join_lines("草稿\n模型。\n当 token\n中\n\n第二段。 好的 abc\ndef") == \
        "草稿模型。当 token\n中\n\n第二段。好的 abc\ndef"
    zh = languages.load_lesson("zh")
    assert all("\n\n" in ch.text for ch in zh)  # its two paragraphs kept
    between = re.compile(rf"{languages.CJK.pattern}\s{languages.CJK.pattern}")
    assert not any(between.search(ch.text + ch.question.ask + ch.question.why) for ch in zh)


def test_french_marks_keep_their_word():
    assert languages.typeset("Combien ? Ici : oui ; « non »", "fr") == \
        "Combien\u202f? Ici\u202f: oui\u202f; « non\u202f»"
    assert languages.typeset("¿Cuántas? Aquí: sí", "es") == "¿Cuántas? Aquí: sí"
    fr = languages.load_lesson("fr")
    assert all(" ?" not in ch.question.ask and " :" not in ch.text for ch in fr)


def test_values_in_words_resolve_in_the_lessons_language():
    """A race's drafter is words (`race_result.drafter_words`): each language's chapter 6 names it in that
    language, whatever the language of the code that first asked for the chapters."""
    from app.race_result import drafter_words
    from app.lesson.values import race

    drafter = race("gallery-summarize-1")[1].lanes[0].summary.models["draft"]
    for lang in i18n.LANGUAGES:
        with i18n.using("en"):
            ask = languages.load_lesson(lang)[5].question.ask
        with i18n.using(lang):
            assert languages.typeset(drafter_words(drafter), lang) in ask, (lang, ask)
    assert drafter_words(drafter) not in languages.load_lesson("zh")[5].question.ask  # English outside a language


def test_the_languages_module_does_not_import_gradio():
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys, app.lesson.languages as l; l.load_lesson('zh'); print('gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
