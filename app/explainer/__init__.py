"""The Explainer tab: one run, decoded live or opened from a trace, shown iteration by iteration (draft
row, p vs q, residual, draft tree, running charts, theory, the method's own panel) with a player in the
browser.

    tab.py          `build` (the layout and its events), `stop_cancels` (Stop, once every tab's model
                    events exist)
    handlers.py     Run, Step, Stop, Reset, the timeline, the player, opening traces, the pair and method
                    controls
    view.py         every panel for one iteration, named by `VIEW_OUTPUTS`; the theory panel
    panels.py       the method panel, chosen by the registry entry's trace data
    playback.py     the browser player's data for a run

`build` and `stop_cancels` are tab.py's, imported on first use (as in the other tab packages). Importing
the package hands the method and theory panels to the figures for slides (`app.export.panels.use_views`).
"""

from ..export.panels import use_views as _use_views
from .panels import method_panel as _method_panel
from .view import theory_panel as _theory_panel

_use_views(method_panel=_method_panel, theory_panel=_theory_panel)

_TAB = ("build", "stop_cancels", "ExplainerTab")


def __getattr__(name):
    if name in _TAB:
        from . import tab

        return getattr(tab, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
