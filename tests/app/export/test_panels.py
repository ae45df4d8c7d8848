"""The exported figures (app/export): every panel of the Explainer, the race and the lab as an SVG that
parses as XML and holds the panel's tokens as text, and a PNG at least 1600 px wide, each captioned with
the run's settings."""

import xml.etree.ElementTree as ET

import pytest

from app import export, i18n
import app.explainer  # noqa: F401  (hands its panels to the figures)
import app.lab  # noqa: F401  (hands its run to the figures)
from app.export.panels import explainer_scene, lab_scene, race_caption
from app.export.race import race_figure
from app.export.scene import MIN_PNG_WIDTH, png_size, to_png, to_svg
from app.html_text import visible
from app.export.tokens import chip_entries
from app.render import record_chips
from app.session import Session, example_traces, read_trace
from app.settings import settings_from_summary

SVG = "{http://www.w3.org/2000/svg}"


def _session(stem: str) -> Session:
    title, path = next((t, p) for t, p in example_traces().items() if p.stem == stem)
    records, summary = read_trace(path)
    return Session(records=list(records), summary=summary, settings=settings_from_summary(summary), source="example",
                   title=title)


def svg_texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)  # parses as XML, or the test fails here
    assert root.tag == SVG + "svg"
    return [el.text or "" for el in root.iter(SVG + "text")]


@pytest.fixture(scope="module")
def spec():
    return _session("01_list_copy_speculative")


def test_every_explainer_panel_is_an_svg_with_a_caption_and_a_png_1600_px_wide(spec):
    i = 10
    for panel in export.EXPLAINER_PANELS:
        scene = explainer_scene(spec, panel, upto=i)
        texts = " ".join(svg_texts(to_svg(scene)))
        for words in ("speculative", "γ = 4", "temperature 0.7", "seed 1", f"iteration {i + 1} of {len(spec.records)}"):
            assert words in texts, (panel, words)
        width, height = png_size(to_png(scene))
        assert width >= MIN_PNG_WIDTH and height > 100, panel


def test_the_token_panels_hold_the_records_tokens(spec):
    i = 15
    record = spec.records[i]
    chips = " ".join(svg_texts(to_svg(explainer_scene(spec, "chips", upto=i))))
    for r in spec.records[: i + 1]:
        for text, _, _, _ in chip_entries(r):
            assert visible(text) in chips
    row = svg_texts(to_svg(explainer_scene(spec, "draft_row", upto=i)))
    assert [visible(d.text) for d in record.draft] == [t for t in row if t in {visible(d.text) for d in record.draft}][
        : len(record.draft)]
    for panel in ("pq", "residual"):  # the charts hold the top tokens as category labels
        texts = svg_texts(to_svg(explainer_scene(spec, panel, upto=i)))
        assert texts, panel


def test_the_figures_chips_are_the_live_chips(spec):
    import re

    for record in spec.records:
        live = [re.search(r'class="chip chip-(\w+)', chip).group(1) for chip in record_chips(record)]
        assert live == [kind for _, kind, _, _ in chip_entries(record)]


def test_the_coins_and_the_tree_show_the_iteration(spec):
    i = next(k for k, r in enumerate(spec.records) if any(d.coin is not None for d in r.draft))
    record = spec.records[i]
    coins = " ".join(svg_texts(to_svg(explainer_scene(spec, "coin", upto=i))))
    for d in record.draft:
        if d.coin is not None:
            assert f"u = {d.coin:.3f}" in coins
    tree = svg_texts(to_svg(explainer_scene(spec, "tree", upto=i)))
    assert {visible(n.text) for n in record.tree[:40]} <= set(tree)


@pytest.mark.parametrize("stem", ["06_code_mjsd_beams4_tau0.1", "07_list_ppd_tree16", "05_question_mentored_kl0.3",
                                  "04_list_copy_autoregressive"])
def test_other_methods_panels_draw(stem):
    s = _session(stem)
    for panel in export.EXPLAINER_PANELS:
        svg_texts(to_svg(explainer_scene(s, panel)))


def test_no_run_is_a_figure_that_says_so():
    for panel in export.EXPLAINER_PANELS:
        texts = " ".join(svg_texts(to_svg(explainer_scene(None, panel))))
        assert i18n.t("export.caption.none") in texts


def test_the_figure_speaks_the_sessions_language(spec):
    texts = " ".join(svg_texts(to_svg(explainer_scene(spec, "draft_row", upto=3, lang="zh"))))
    assert "随机种子 1" in texts and "草稿" in texts


def test_the_race_figure_holds_each_lanes_tokens():
    from app.race.handlers import race_view
    from app.race_file import read_race, shipped_races

    title, path = next(iter(shipped_races().items()))
    value, figures = race_view(read_race(path))
    scene = race_figure(value, race_caption(figures))
    texts = svg_texts(to_svg(scene))
    for lane in value["lanes"]:
        shown = [tok["text"] for tok in lane["tokens"][:20]]
        assert all(visible(t) in texts for t in shown)
        assert any(lane["name"] in t for t in texts)
    assert any("seed" in t for t in texts)
    assert texts.count(i18n.t("export.kind.accepted")) == 1  # the legend names each kind once
    assert png_size(to_png(scene))[0] >= MIN_PNG_WIDTH


def test_the_lab_figures():
    from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB

    table = [[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)]
    for panel in export.LAB_PANELS:
        scene = lab_scene(panel, table, 1.0, 1000, 0, "correct")
        texts = " ".join(svg_texts(to_svg(scene)))
        assert "N = 1,000" in texts and "seed 0" in texts
        if panel == "lab":
            assert all(visible(v) in texts for v in EXAMPLE_VOCAB)
        assert png_size(to_png(scene))[0] >= MIN_PNG_WIDTH


def test_files_are_written_in_both_formats(spec):
    svg = export.explainer_file(spec, "chips", "svg")
    png = export.explainer_file(spec, "chips", "png")
    assert svg.endswith(".svg") and png.endswith(".png")
    svg_texts(open(svg, encoding="utf-8").read())
    assert png_size(open(png, "rb").read())[0] >= MIN_PNG_WIDTH
    with pytest.raises(ValueError):
        export.explainer_file(spec, "chips", "gif")
