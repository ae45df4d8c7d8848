"""The Exactness lab tab: one speculative step on a hand-written p and q, sampled N times, against the
distribution the rule should produce (`decoding.rules.lab`).

    tab.py      `build`: the layout and its events
    events.py   its handlers: sample N, watch it converge, normalise the table

`build` is tab.py's, imported on first use (as in the other tab packages). Importing the package hands
the lab's run to the figures for slides (`app.export.panels.use_views`).
"""

from ..export.panels import use_views as _use_views
from .events import lab_run as _lab_run

_use_views(lab_run=_lab_run)

_TAB = ("build",)


def __getattr__(name):
    if name in _TAB:
        from . import tab

        return getattr(tab, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
