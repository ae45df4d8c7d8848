"""Figures for slides: every panel of the app as a standalone SVG and a PNG at least 1600 px wide, in a
light theme that projects well, captioned with the run's settings.

- scene.py   drawing data and its two writers (SVG text, PNG via Pillow)
- theme.py   the light theme, titles and the caption line naming the run's settings
- tokens.py  chips, the draft row, the coins
- tree.py    the draft tree
- plot.py    the app's plotly charts redrawn (p/q, residual, running, theory, method, lab)
- race.py    the race's lanes
- panels.py  which panels each tab exports and the files it writes
"""

from .panels import (EXPLAINER_PANELS, FORMATS, LAB_PANELS, RACE_PANELS, explainer_file, explainer_scene, lab_file,
                     lab_scene, panel_choices, race_file)

__all__ = ["EXPLAINER_PANELS", "FORMATS", "LAB_PANELS", "RACE_PANELS", "explainer_file", "explainer_scene",
           "lab_file", "lab_scene", "panel_choices", "race_file"]
