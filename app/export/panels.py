"""Which panels each tab exports, and the one function per tab that turns what the tab shows into a
figure file: `explainer_file`, `race_file`, `lab_file`.

Every figure is built by a pure function of the plain data the live panel renders (records, the
plotly figure data, the race player's value) and written as SVG (`scene.to_svg`) or PNG
(`scene.to_png`, at least 1600 px wide) into a temporary folder Gradio serves for download.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path

from .. import charts, charts_running
from ..i18n import t
from ..settings import Settings, settings_from_summary
from .plot import figure_scene
from .race import race_figure
from .scene import Scene, to_png, to_svg
from .theme import run_caption
from .tokens import chips_figure, coin_figure, draft_row_figure
from .tree import tree_figure
from ..iterations import rest_index

# The tabs' own views a figure redraws (the Explainer's method and theory panels, the lab's run), handed
# in by the tab packages when they are imported (app/explainer/__init__.py, app/lab/__init__.py): this
# package sits below the tabs, and a module below them never imports a tab package.
VIEWS: dict = {}


def use_views(**views) -> None:
    """Register a tab's views by name (method_panel, theory_panel, lab_run)."""
    VIEWS.update(views)


def _view(name: str):
    try:
        return VIEWS[name]
    except KeyError:
        raise RuntimeError(f"the figure needs the view {name!r}, which its tab package registers when imported "
                           "(import app.explainer or app.lab first)") from None

FORMATS = ("svg", "png")
EXPLAINER_PANELS = ("chips", "draft_row", "coin", "pq", "residual", "tree", "running", "theory", "method")
RACE_PANELS = ("race",)
LAB_PANELS = ("lab", "lab_residual", "lab_tv")

_FOLDER: str | None = None


def _folder() -> Path:
    """One temporary folder for the process's exported figures (removed at exit)."""
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = tempfile.mkdtemp(prefix="specdec-figures-")
        atexit.register(shutil.rmtree, _FOLDER, True)
    return Path(_FOLDER)


def panel_choices(panels, lang: str | None = None) -> list[tuple[str, str]]:
    """(label, key) pairs for a panel menu."""
    return [(t(f"export.panel.{key}", lang), key) for key in panels]


def write(scene: Scene, fmt: str, name: str) -> str:
    """The scene written as `name`.svg or `name`.png in a fresh subfolder; returns the path."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "figure"
    path = folder / f"speculative-decoding-{slug}.{fmt}"
    if fmt == "svg":
        path.write_text(to_svg(scene), encoding="utf-8")
    else:
        path.write_bytes(to_png(scene))
    return str(path)


def session_precision(session) -> str | None:
    """The precision the session's run used: the loaded target's dtype (live), the trace's (replay)."""
    if session is None:
        return None
    target = getattr(session, "target", None)
    if target is not None and getattr(session, "source", "") == "live":
        return str(target.dtype).removeprefix("torch.")
    models = (session.summary.models if session.summary is not None else None) or {}
    return models.get("dtype")


def explainer_scene(session, panel: str, upto: int | None = None, position: int | None = None,
                    lang: str | None = None) -> Scene:
    """The Explainer's `panel` (a key of EXPLAINER_PANELS) at record index `upto` (None: the last)
    and draft position `position` (an index, None: the first rejection), captioned with the run's
    settings. Every panel of an empty session is a figure that says there is no run."""
    method_panel, theory_panel = _view("method_panel"), _view("theory_panel")

    if panel not in EXPLAINER_PANELS:
        raise ValueError(f"unknown panel {panel!r}")
    records = list(session.records) if session is not None and session.records else []
    settings: Settings | None = None
    if session is not None:
        settings = session.settings or settings_from_summary(session.summary)
    i = None
    if records:  # as the view: a finished run rests on its last iteration with a draft
        i = rest_index(records) if upto is None else max(0, min(int(upto), len(records) - 1))
    record = records[i] if i is not None else None
    source = "live" if session is not None and session.source == "live" else "trace"
    caption = run_caption(settings if records else None, session_precision(session), i, len(records) or None,
                          lang, source)
    title = t(f"export.panel.{panel}", lang)
    if panel == "chips":
        return chips_figure(records, i, settings.prompt if settings is not None else None, caption, lang)
    if panel == "draft_row":
        return draft_row_figure(record, caption, lang)
    if panel == "coin":
        return coin_figure(record, caption, lang)
    if panel == "tree":
        return tree_figure(record, caption, lang)
    if panel == "pq":
        fig = charts.pq_figure(record, position)
    elif panel == "residual":
        fig = charts.residual_figure(record)
    elif panel == "running":
        fig = charts_running.running_figure(records, i, session.baseline_tps() if session is not None else None,
                                            getattr(session, "target_bytes", None),
                                            getattr(session, "draft_bytes", None))
    elif panel == "theory":
        fig = theory_panel(session, i)[0] if records else charts.empty_figure(t("export.no_run", lang))
    else:  # the shown method's own chart (none for plain speculative sampling)
        shown = method_panel(record, position, records)[3] if record is not None else None
        if isinstance(shown, dict) and shown.get("__type__") == "update":  # gr.update(value=figure, ...)
            shown = shown.get("value")
        fig = shown if isinstance(shown, dict) and shown.get("data") else None
        if fig is None:
            fig = charts.empty_figure(t("export.no_method_chart", lang))
    return figure_scene(fig, title, caption, lang)


def explainer_file(session, panel: str, fmt: str, upto: int | None = None, position: int | None = None,
                   lang: str | None = None) -> str:
    """The Explainer's `panel` written as an SVG or PNG file; returns its path."""
    return write(explainer_scene(session, panel, upto, position, lang), fmt, panel)


def race_caption(figures: dict | None, lang: str | None = None) -> str:
    """The race's caption: lane A's settings (both lanes share all but the method and its drafter and γ)."""
    from decoding.trace.record import RunSummary

    lanes = (figures or {}).get("lanes") or []
    if not lanes:
        return t("export.caption.none", lang)
    try:
        summaries = [RunSummary.from_dict(lane["summary"]) for lane in lanes]
    except (KeyError, TypeError, ValueError):
        return t("export.caption.none", lang)
    settings = settings_from_summary(summaries[0])
    names = " · ".join(f"{lane.get('label', '')}: {lane.get('name', '')}" for lane in lanes)
    models = summaries[0].models or {}
    return names + " · " + run_caption(settings, models.get("dtype"), None, None, lang)


def race_file(player_value: dict | None, figures: dict | None, fmt: str, lang: str | None = None) -> str:
    """The race (the player's value, `player.player_data`) as an SVG or PNG file; returns its path."""
    return write(race_figure(player_value, race_caption(figures, lang), lang), fmt, "race")


def lab_scene(panel: str, table, lenience, n, seed, implementation, lang: str | None = None) -> Scene:
    """The lab's `panel` for the table and settings shown (the lab's own run: cheap and seeded, so the
    figure holds the numbers the tab shows)."""
    lab_run = _view("lab_run")
    if panel not in LAB_PANELS:
        raise ValueError(f"unknown panel {panel!r}")
    main, residual, tv, _ = lab_run(table, lenience, n, seed, implementation)
    fig = {"lab": main, "lab_residual": residual, "lab_tv": tv}[panel]
    caption = t("export.caption.lab", lang, implementation=implementation, lenience=f"{float(lenience):g}",
                n=f"{int(n):,}", seed=int(seed))
    return figure_scene(fig, t(f"export.panel.{panel}", lang), caption, lang)


def lab_file(panel: str, fmt: str, table, lenience, n, seed, implementation, lang: str | None = None) -> str:
    return write(lab_scene(panel, table, lenience, n, seed, implementation, lang), fmt, panel)
