"""The lesson in the class's language: each language's words laid over the English lesson (no Gradio).

`assets/lesson.yaml` is the English lesson and the lesson's structure. A language's file,
`assets/lesson.<lang>.yaml` (es, fr, zh: `app.i18n.LANGUAGES`), holds only the words of each chapter,
keyed by the chapter's id:

    chapters:
      guess-and-verify:
        title: Adivinar y verificar
        text: |
          ...
        try: Lanza la moneda otra vez (semilla 0)     # the Try this button's label
        question:
          ask: ...
          choices: [..., ...]                          # as many as English, in the same order
          why: ...

Everything else (the widget, the settings a try-this or a reveal changes, "Run it live", which choice
is right) is read from the English chapter, so a translation cannot change a setting or an answer: a
language file that names one is refused. `check_language` lists, in plain words, everything wrong
with a language file: a chapter English has and the file lacks (named by number, id and English title,
so a new English chapter is easy to translate), a chapter English lacks, a missing or empty field, a
field that is not translatable, a choice list of another length, a placeholder changed, dropped or
added (each field must hold exactly the English field's placeholders, in any order), a number typed
that the English field does not type (numbers come through placeholders; a number English types,
such as γ = 4, must stay the same), a text over the word limit, or two choices that read the same.

`load_lesson(lang)` gives the chapters in a language. A field a language lacks, or gets wrong, shows
in English: never silently, it is recorded in `app.i18n.missing()` as ("es", "lesson.<id>.<field>")
and logged once, so the test that renders every chapter in every language fails on it.
"""

from __future__ import annotations

import copy
import logging
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import yaml

from decoding.paths import ASSETS

from .. import i18n
from .content import (CJK, LESSON_FILE, MAX_WORDS, PLACEHOLDER, Chapter, LessonError, Question, _words, chapter_id,
                      parse, resolve)

FIELDS = ("title", "text", "try", "question.ask", "question.choices", "question.why")
# Spanish and French run about a fifth longer than English; Chinese is counted two characters a word (`_words`).
TRANSLATED_MAX_WORDS = round(MAX_WORDS * 1.3)
NUMBER = re.compile(r"[0-9]+")
CJK_PUNCT = "[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]"  # 。、「」 and the full-width ，：；？！（）

_log = logging.getLogger(__name__)
_logged: set[str] = set()


def language_file(lang: str) -> Path:
    """Where a language's lesson lives: the English one is the lesson itself."""
    return LESSON_FILE if lang == i18n.DEFAULT else ASSETS / f"lesson.{lang}.yaml"


def english_words(ch: dict) -> dict[str, object]:
    """The translatable fields of one English chapter (raw, placeholders unresolved)."""
    q = ch.get("question") or {}
    return {"title": ch.get("title"), "text": ch.get("text"), "try": (ch.get("try") or {}).get("label"),
            "question.ask": q.get("ask"), "question.choices": q.get("choices"), "question.why": q.get("why")}


def join_lines(text: str) -> str:
    """A text written without spaces (Chinese) with its line breaks inside a paragraph taken out: a
    browser shows such a break, or YAML's folding of it, as a space between two characters. Paragraph
    breaks (blank lines) and the spaces between Chinese and Latin words stay."""
    text = re.sub(rf"(?<={CJK.pattern})[ \t]*\n?[ \t]*(?={CJK.pattern})", "", text)
    return re.sub(rf"(?<={CJK_PUNCT})[ \t]*\n[ \t]*(?!\n)|(?<!\n)[ \t]*\n[ \t]*(?={CJK_PUNCT})", "", text)


def _placeholders(text: str) -> Counter:
    return Counter(m.group(0) for m in PLACEHOLDER.finditer(text))


def _numbers(text: str) -> Counter:
    """The numbers typed outside placeholders, as runs of digits: "0.4" and "0,4", "100,000" and
    "100 000" read the same (the separators follow the language), a changed figure does not."""
    return Counter(NUMBER.findall(PLACEHOLDER.sub(" ", text)))


def _differs(what: str, ours: Counter, english: Counter) -> str:
    lost, added = english - ours, ours - english
    parts = ([f"lacks {', '.join(sorted(lost))}"] if lost else []) + \
        ([f"adds {', '.join(sorted(added))}"] if added else [])
    return f"its {what} differ from the English: it {' and '.join(parts)}"


def _check_text(where: str, text, english: str, limit: int | None, problems: list[str]) -> str | None:
    """One translated text, resolved; None (with the problem) where it cannot be shown."""
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where} is empty or not text")
        return None
    before = len(problems)
    if _placeholders(text) != _placeholders(english):
        problems.append(f"{where}: {_differs('placeholders', _placeholders(text), _placeholders(english))} "
                        "(keep each {...} exactly as the English writes it)")
    if any(brace in PLACEHOLDER.sub("", text) for brace in "{}"):
        problems.append(f"{where}: a brace outside a placeholder (a {{...}} mistyped?)")
    if _numbers(text) != _numbers(english):
        problems.append(f"{where}: {_differs('typed numbers', _numbers(text), _numbers(english))} "
                        "(figures come through placeholders; keep the numbers the English types)")
    if len(problems) > before:
        return None
    try:
        shown = join_lines(resolve(text))
    except ValueError as exc:  # the English resolves, so only a mangled placeholder gets here
        problems.append(f"{where}: {exc}")
        return None
    if limit is not None and _words(shown) > limit:
        problems.append(f"{where} has {_words(shown)} words; keep it to {limit}")
        return None
    return shown


def _check_chapter(where: str, ours, english: dict, problems: list[str]) -> dict[str, object]:
    """The resolved fields of one translated chapter that can be shown (the others are left out)."""
    if not isinstance(ours, dict):
        problems.append(f"{where} is not a mapping of title, text, try and question")
        return {}
    words = english_words(english)
    extra = sorted(set(ours) - {"title", "text", "try", "question"})
    if extra:
        problems.append(f"{where}: {', '.join(extra)} cannot be translated (a chapter's widget, settings and live "
                        "run come from the English lesson; a language file holds title, text, try and question)")
    q = ours.get("question")
    if q is not None and not isinstance(q, dict):
        problems.append(f"{where}: question is a mapping of ask, choices and why")
        q = {}
    q = q or {}
    extra = sorted(set(q) - {"ask", "choices", "why"})
    if extra:
        problems.append(f"{where}: question.{', question.'.join(extra)} cannot be translated (which choice is right "
                        "comes from the English lesson; a question holds ask, choices and why)")
    if isinstance(ours.get("try"), dict):
        problems.append(f"{where}: try is the Try this button's label only (its settings come from the English lesson)")
    got: dict[str, object] = {}
    values = {"title": ours.get("title"), "text": ours.get("text"), "try": ours.get("try"),
              "question.ask": q.get("ask"), "question.choices": q.get("choices"), "question.why": q.get("why")}
    for field in FIELDS:
        value = values[field]
        if value is None:
            problems.append(f"{where} lacks {field}")
            continue
        if field == "question.choices":
            shown = _check_choices(f"{where}: question.choices", value, words[field], problems)
        elif field == "try" and isinstance(value, dict):
            continue  # said above
        else:
            limit = TRANSLATED_MAX_WORDS if field == "text" else None
            shown = _check_text(f"{where}: {field}", value, words[field], limit, problems)
        if shown is not None:
            got[field] = shown
    return got


def _check_choices(where: str, choices, english: list, problems: list[str]) -> list[str] | None:
    if not isinstance(choices, list) or len(choices) != len(english):
        problems.append(f"{where} must be a list of {len(english)} choices, in the English order (the English "
                        "lesson says which one is right)")
        return None
    shown = [_check_text(f"{where} {n}", c, e, None, problems) for n, (c, e) in enumerate(zip(choices, english), 1)]
    if any(s is None for s in shown):
        return None
    if len(set(shown)) != len(shown):
        problems.append(f"{where}: two choices read the same: {shown}")
        return None
    return shown


def check_language(english: dict, data, lang: str) -> tuple[dict[str, dict[str, object]], list[str]]:
    """(chapter id -> its resolved translated fields that can be shown, every problem found) of a
    parsed language file `data` against the parsed English lesson `english`."""
    name = language_file(lang).name
    chapters = english.get("chapters") or []
    if not isinstance(data, dict) or not isinstance(data.get("chapters"), dict):
        return {}, [f"{name} needs chapters: a mapping of chapter ids (as in lesson.yaml) to their words"]
    problems: list[str] = []
    extra = sorted(set(data) - {"chapters"})
    if extra:
        problems.append(f"{name}: {', '.join(extra)} is not part of a language file (it holds chapters: only)")
    ours = data["chapters"]
    ids = [chapter_id(ch) for ch in chapters]
    for cid in ours:
        if cid not in ids:
            problems.append(f"{name} has a chapter {cid!r} that the English lesson lacks "
                            f"(its chapters: {', '.join(ids)})")
    out: dict[str, dict[str, object]] = {}
    for n, (cid, ch) in enumerate(zip(ids, chapters), 1):
        title = ch.get("title")
        if cid not in ours:
            problems.append(f"{name} lacks chapter {n} ({cid}: {title!r}); translate it from lesson.yaml")
            continue
        got = _check_chapter(f"{name} chapter {n} ({cid})", ours[cid], ch, problems)
        out[cid] = {k: [typeset(v, lang) for v in value] if isinstance(value, list) else typeset(value, lang)
                    for k, value in got.items()}
    return out, problems


def typeset(text: str, lang: str) -> str:
    """French typography: the space before : ; ? ! and » is a narrow no-break one, so a line never
    starts with the mark (the files are written with plain spaces)."""
    return re.sub(r" (?=[:;?!»])", "\u202f", text) if lang == "fr" else text


def _read(path: Path):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    except yaml.YAMLError as exc:
        raise LessonError(f"{path.name} is not valid YAML: {exc}") from None


def _note(lang: str, problem: str) -> None:
    if problem not in _logged:
        _logged.add(problem)
        _log.warning("lesson (%s): %s; showing English there", lang, problem)


def translate(english: list[Chapter], english_raw: dict, data, lang: str) -> tuple[list[Chapter], list[str]]:
    """(the English chapters with a language's words laid over them, the "lesson.<id>.<field>" keys
    shown in English because the language file lacks that field or gets it wrong; each problem logged)."""
    words, problems = check_language(english_raw, data, lang)
    for problem in problems:
        _note(lang, problem)
    out, fallbacks = [], []
    for ch in english:
        got = words.get(ch.id, {})
        fallbacks += [f"lesson.{ch.id}.{field}" for field in FIELDS if field not in got]
        q = ch.question
        out.append(Chapter(
            got.get("title", ch.title), got.get("text", ch.text), dict(ch.widget), got.get("try", ch.try_label),
            dict(ch.try_set),
            Question(got.get("question.ask", q.ask), list(got.get("question.choices", q.choices)), q.answer,
                     got.get("question.why", q.why)),
            dict(ch.live), dict(ch.reveal), ch.id))
    return out, fallbacks


@lru_cache(maxsize=None)
def _load(lang: str, live_keys: tuple | None) -> tuple[tuple[Chapter, ...], tuple[str, ...]]:
    # values that are words (a race's drafter, `race_result.drafter_words`) resolve in the language
    with i18n.using(lang):
        return _load_in(lang, live_keys)


def _load_in(lang: str, live_keys: tuple | None) -> tuple[tuple[Chapter, ...], tuple[str, ...]]:
    text = LESSON_FILE.read_text(encoding="utf-8")
    english = parse(text, live_keys)
    if lang == i18n.DEFAULT:
        return tuple(english), ()
    data = _read(language_file(lang))
    if data is None:
        _note(lang, f"there is no {language_file(lang).name}")
        data = {"chapters": {}}
    chapters, fallbacks = translate(english, yaml.safe_load(text), data, lang)
    return tuple(chapters), tuple(fallbacks)


def load_lesson(lang: str | None = i18n.DEFAULT, live_keys=None) -> list[Chapter]:
    """The lesson's chapters in `lang` (English for "en", an unknown code or None), read once per
    language; LessonError when the English lesson itself cannot be shown. Every call records the
    fields shown in English (`app.i18n.missing`), so a test that resets the record sees them again."""
    lang = i18n.normalize(lang) or i18n.DEFAULT
    chapters, fallbacks = _load(lang, None if live_keys is None else tuple(live_keys))
    for key in fallbacks:
        i18n.record_missing(lang, key)
    return [copy.deepcopy(ch) for ch in chapters]
