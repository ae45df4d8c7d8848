"""The Race tab: two methods decode the same prompt on the same models, one after the other, and the
browser replays both lanes on one clock; shipped races replay without a model. A plain comparison
table sits in an accordion below.

    tab.py        `build`: the layout and its events
    handlers.py   run a race, open a shipped or uploaded race file, pick a gallery prompt, lane A's drafter
    compare.py    the plain comparison table (method A, then B)
    text.py       is a lane's text fit to show a class (loops, echoes); no Gradio

The race file format, its figures and its recording are shared with the lesson and ZeroGPU, so they
sit at the app's root: race_file.py, race_result.py, race_run.py. `build` is tab.py's, imported on
first use (as in the other tab packages).
"""

_TAB = ("build", "RaceTab")


def __getattr__(name):
    if name in _TAB:
        from . import tab

        return getattr(tab, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
