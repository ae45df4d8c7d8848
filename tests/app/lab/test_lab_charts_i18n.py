"""The lab's charts speak the page's language: every title, axis and legend from the catalogs."""

import pytest

from app import charts, i18n

RESULT = {"target": [0.4, 0.3, 0.2, 0.1], "draft": [0.5, 0.25, 0.15, 0.1], "expected": [0.4, 0.3, 0.2, 0.1],
          "empirical": [0.41, 0.29, 0.2, 0.1], "n": 10000, "lenience": 0.5, "cap": [0.8, 0.6, 0.4, 0.2],
          "tv_to_expected": 0.0098, "tv_to_target": 0.0098, "implementation": "correct",
          "residual": [0.0, 0.5, 0.5, 0.0]}
VOCAB = ["is", "stock", "girl", "cherry"]


def _texts(fig) -> list[str]:
    layout = fig["layout"]
    texts = [layout.get("title", {}).get("text", "")] + [trace.get("name", "") for trace in fig["data"]]
    for axis in ("xaxis", "yaxis"):
        texts.append(layout.get(axis, {}).get("title", {}).get("text", ""))
    texts += [a.get("text", "") for a in layout.get("annotations", [])]
    return [t for t in texts if t]


@pytest.mark.parametrize("lang", [code for code in i18n.LANGUAGES if code != i18n.DEFAULT])
def test_the_lab_charts_have_no_english_words(lang):
    i18n.strict(True)
    try:
        with i18n.using("en"):
            english = [charts.lab_figure(VOCAB, RESULT), charts.lab_residual_figure(VOCAB, RESULT),
                       charts.tv_figure([(10000, 0.0098)]), charts.tv_figure([]),
                       charts.lab_residual_figure(VOCAB, {**RESULT, "residual": None})]
        with i18n.using(lang):
            shown = [charts.lab_figure(VOCAB, RESULT), charts.lab_residual_figure(VOCAB, RESULT),
                     charts.tv_figure([(10000, 0.0098)]), charts.tv_figure([]),
                     charts.lab_residual_figure(VOCAB, {**RESULT, "residual": None})]
    finally:
        i18n.strict(False)
    for en_fig, fig in zip(english, shown):
        same = set(_texts(en_fig)) & set(_texts(fig))
        assert not same, f"English in the {lang} lab chart: {same}"
