"""Is a lane's text fit to show a class? Two plain checks on words, used by `scripts/record_races.py`
before it writes a showcase race and by the tests on the shipped races:

- a loop: a span of words that comes back again and again (a small model at temperature 0 often
  falls into one: "The glass box is not allowed ... The glass box is not allowed ..."), i.e. a span
  of at least `LOOP_WORDS` words three times, or of at least `LONG_LOOP_WORDS` words twice;
- an echo: most of the text copied from the prompt where the task asks for new words (a
  "translation" that repeats the German). Summaries, answers from a passage and rewrites may copy
  (`MAY_COPY`); there copying is the point, and what prompt lookup speeds up.

Words are compared in lower case without punctuation. No Gradio here.
"""

from __future__ import annotations

import re

LOOP_WORDS = 5  # a span this long, three times, is a loop
LONG_LOOP_WORDS = 10  # a span this long, twice, is a loop
ECHO_SPAN = 6  # an output word is "copied" when it lies in a span of this many words found in the prompt
ECHO_SHARE = 0.6  # more than this share of copied words is an echo
MAY_COPY = frozenset({"summarize", "rag", "rewrite"})  # gallery kinds whose answers may copy the prompt


def words(text: str) -> list[str]:
    """Lower-case words without punctuation ("Hello, world!" -> ["hello", "world"])."""
    return re.findall(r"\w+(?:['’]\w+)?", text.lower())


def _spans(ws: list[str], n: int) -> dict[tuple[str, ...], list[int]]:
    found: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(ws) - n + 1):
        found.setdefault(tuple(ws[i:i + n]), []).append(i)
    return found


def _count_apart(starts: list[int], n: int) -> int:
    """How many of the occurrences starting at `starts` do not overlap the one before (a run of
    one word repeated overlaps itself)."""
    count, last = 0, None
    for s in starts:
        if last is None or s >= last + n:
            count, last = count + 1, s
    return count


def loop(text: str) -> str | None:
    """The repeated span when the text loops (see the module docstring), else None."""
    ws = words(text)
    for n, times in ((LONG_LOOP_WORDS, 2), (LOOP_WORDS, 3)):
        for span, starts in _spans(ws, n).items():
            if _count_apart(starts, n) >= times:
                return " ".join(span)
    return None


def copied_share(text: str, prompt: str) -> float:
    """The share of the text's words that lie in a span of `ECHO_SPAN` words also found in the prompt."""
    ws = words(text)
    if not ws:
        return 0.0
    source = set(_spans(words(prompt), ECHO_SPAN))
    copied = [False] * len(ws)
    for i in range(len(ws) - ECHO_SPAN + 1):
        if tuple(ws[i:i + ECHO_SPAN]) in source:
            copied[i:i + ECHO_SPAN] = [True] * ECHO_SPAN
    return sum(copied) / len(ws)


def text_problems(text: str, prompt: str, kind: str | None = None) -> list[str]:
    """What makes a lane's text unfit to show (empty when it is fine), in words. `kind`: the gallery
    kind of the prompt (summarize, rag, translate, ...), which says whether copying it is the task."""
    problems = []
    if not words(text):
        problems.append("it wrote no words")
    span = loop(text)
    if span is not None:
        problems.append(f"it loops: {span!r} comes back again and again")
    share = copied_share(text, prompt)
    if kind not in MAY_COPY and share > ECHO_SHARE:
        problems.append(f"it echoes the prompt: {share:.0%} of its words are copied from it")
    return problems
