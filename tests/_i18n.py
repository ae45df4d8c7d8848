"""What the language tests share: the areas of the catalogs whose texts the Lesson's chrome, the Race tab
and the Exactness lab show, and the short list of texts that rightly read the same in a language as in
English (tests/app/test_i18n_ui.py, tests/e2e/test_language_browser.py)."""

MY_AREAS = ("common", "lesson_ui", "race", "lab")
# Texts that read the same in a language as in English, and why that is right there
SAME_AS_ENGLISH = {
    "*": {
        "lab.col.token", "lesson.w.col.token",  # "token" is the field's word in every language here
        "race.cmp.tps", "player.fig.tps",  # the unit tokens/s
        "race.method.mjsd", "race.method.ppd",  # methods' names (acronyms of their papers)
        "race.note.sep", "race.note.head", "race.note.head_only",  # punctuation around placeholders only
    },
    # "token(s)" is the word Spanish and French texts of the field use; "prompt" is the usual word for the
    # model's input in both
    "es": {"race.result.tokens_one", "race.result.tokens", "race.cmp.tokens", "player.fig.tokens", "player.prompt"},
    "fr": {"race.result.tokens_one", "race.result.tokens", "race.cmp.tokens", "player.fig.tokens", "player.prompt",
           "player.kind.correction", "player.kind.bonus", "lab.convergence",  # the same words in French
           "lesson.ui.question"},  # "**Question.** {ask}": the same word in French
    "zh": set(),
}
