"""The checks on a lane's text (app/race/text.py) and the shipped races that pass them."""

import pytest

from app.gallery import gallery_item, gallery_tags
from app.race_file import read_race, shipped_races
from app.race_result import speedup
from app.race.text import copied_share, loop, text_problems, words

GERMAN = ("Translate German to English: Die Schülerinnen und Schüler haben im Rahmen eines Projekts einen kleinen "
          "Garten hinter der Schule angelegt.")


def test_words_ignore_case_and_punctuation():
    assert words("Hello, World! It's 3 o'clock.") == ["hello", "world", "it's", "3", "o'clock"]


def test_a_loop_is_a_span_that_comes_back():
    looping = "The glass box is not allowed to be put in the glass box.\n\n" * 4
    assert loop(looping) is not None
    assert loop("A moment of pure bliss,\n" * 3) == "a moment of pure bliss"
    assert loop("estoy " * 20) is not None  # one word over and over
    # a five-word span twice, or a phrase that recurs in different sentences, is not a loop
    assert loop("a map of the town's past, and then a map of the town's history") is None
    assert loop("The cat sat on the mat. The dog lay on the rug. The bird sang in the tree.") is None


def test_an_echo_is_the_prompt_copied_where_the_task_asks_for_new_words():
    echo = 'In German, "Die Schülerinnen und Schüler haben im Rahmen eines Projekts einen kleinen Garten angelegt."'
    assert copied_share(echo, GERMAN) > 0.6
    assert any("echoes the prompt" in p for p in text_problems(echo, GERMAN, "translate"))
    assert text_problems("The students have planted a small garden behind the school.", GERMAN, "translate") == []
    # a summary may copy its source: that is what copying drafters speed up
    assert text_problems(echo, GERMAN, "summarize") == []
    assert text_problems("", GERMAN, "translate") == ["it wrote no words"]


RACES = shipped_races()


@pytest.mark.parametrize("title", list(RACES))
def test_every_shipped_race_writes_sensible_text_in_both_lanes(title):
    race = read_race(RACES[title])
    item = gallery_item(race.gallery_id)
    assert item is not None and race.title == f"{item.kind}: {item.title}"
    for lane in race.lanes:
        assert lane.summary.prompt == item.prompt
        assert text_problems(lane.summary.text, lane.summary.prompt, item.kind) == [], (lane.label, lane.summary.text)


@pytest.mark.parametrize("title", list(RACES))
def test_the_gallery_tag_of_a_shipped_race_is_that_race(title):
    """The task gallery's measured tag of a shipped race's prompt comes from that very race."""
    race = read_race(RACES[title])
    a, b = race.lanes
    tag = gallery_tags()[race.gallery_id]
    assert tag.gamma == a.summary.settings["gamma"] and tag.precision == a.summary.models["dtype"]
    assert tag.speedup == pytest.approx(speedup(a.summary, b.summary))
    assert tag.drafter_choice == "hybrid" and a.summary.models["draft"].startswith("hybrid")


def test_the_showcase_races_cover_the_kinds_the_lesson_and_the_race_tab_name():
    kinds = {read_race(path).gallery_id.split("-")[1] for path in RACES.values()}
    assert {"summarize", "rag", "translate", "writing"} <= kinds
