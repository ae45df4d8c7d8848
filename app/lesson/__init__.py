"""The Lesson tab: thirteen short chapters from assets/lesson.yaml, each with one idea, one live widget, a
question checked before its answer, a "Try this" and a "Run it live" that moves its settings to the
Explainer (or opens its race in the Race tab).

    content.py   the chapters: loading and checking assets/lesson.yaml ({name} placeholders, word limits)
    languages.py the chapters in a language: assets/lesson.<lang>.yaml's words over the English chapters,
                 checked (same chapters, fields, placeholders, typed numbers), `load_lesson(lang)`
    values.py    the figures the text names, read off the shipped traces and races (no Gradio)
    widgets.py   each chapter's live widget (a trace's iteration, a race, the lab, a closed form)
    tab.py       `build` (the layout), `wire` (its events, once the Explainer and the Race tab exist),
                 a chapter's view and "Run it live"

`build`, `wire`, `ExplainerLinks` and `lesson_css` are tab.py's, imported on first use, so that reading
the lesson's content (content.py, values.py) loads neither Gradio nor the other tabs.
"""

_TAB = ("build", "wire", "ExplainerLinks", "lesson_css")


def __getattr__(name):
    if name in _TAB:
        from . import tab

        return getattr(tab, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
