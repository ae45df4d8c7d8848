"""The "Figures for slides and links" menu a tab lays out (Race, Lab; the Explainer's adds the run's link):
which panel, SVG or PNG, a button that makes the file and the file to download. Its texts follow the
page's language (`i18n.ui.chrome`); the files come from `app/export/` through `app/share.py`.
"""

from __future__ import annotations

import gradio as gr

from . import export
from .i18n import t
from .i18n.ui import chrome


def figure_menu(prefix: str, panels: tuple[str, ...] | None = None) -> dict:
    """Lay the menu out (call inside a column); `prefix` names its elements (`<prefix>-export-btn`, ...).
    `panels`: the panels offered, None for a tab that exports one figure. Returns the components by name
    (panel: None without a choice); the caller adds its link controls inside `box` and wires the events."""
    with gr.Accordion(t("export.menu.title", "en"), open=False, elem_id=f"{prefix}-share") as box:
        chrome(box, label="export.menu.title")
        panel = None
        if panels:
            panel = chrome(gr.Dropdown(export.panel_choices(panels, "en"), value=panels[0],
                                       label=t("export.menu.panel", "en"), elem_id=f"{prefix}-export-panel"),
                           label="export.menu.panel", choices=lambda lang: export.panel_choices(panels, lang))
        fmt = chrome(gr.Radio([("SVG", "svg"), ("PNG", "png")], value="svg", label=t("export.menu.format", "en"),
                              elem_id=f"{prefix}-export-format"), label="export.menu.format")
        make = chrome(gr.Button(t("export.menu.button", "en"), size="sm", elem_id=f"{prefix}-export-btn"),
                      value="export.menu.button")
        note = chrome(gr.Markdown(t("export.menu.note", "en"), elem_classes="note"), value="export.menu.note")
        file = chrome(gr.File(label=t("export.menu.file", "en"), visible=False, interactive=False,
                              elem_id=f"{prefix}-export-file"), label="export.menu.file")
    return dict(box=box, panel=panel, fmt=fmt, make=make, note=note, file=file)
