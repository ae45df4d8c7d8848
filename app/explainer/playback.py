"""The Explainer's player value for the session's run (`player.py` documents the value): one lane tied
to the panels, so that the player and every panel show the same iteration (assets/player.js asks
the panels for each iteration it shows; `handlers.follow_player` answers)."""

from __future__ import annotations

from ..player import empty_data, lane_data, player_data
from ..render import tr
from ..session import Session
from ..iterations import rest_index

PLAYBACK_IDLE = ("The run you open or decode plays here, in your browser: a run with pacing above 0 at that "
                 "pace, after the server has decoded it at full speed (so a whole class can press Run at once).")
# (English, what the tab is built with; `idle_playback` says it in the session's language: explainer.play.idle)


def playback_data(session: Session, pacing: float = 0.0, shared: str = "", current: int | None = None,
                  lang: str | None = None) -> dict:
    """The session's run as one lane of the browser player (`player.py`), tied to the panels: the
    player asks for the iteration it shows (`player_data(sync=...)`) and the panels follow.

    Pacing above 0: iteration i appears at i x `pacing` seconds (the first at once, as the panels
    show it) and the player plays it from the start. Pacing 0: the run is shown as it stands at
    iteration `current` (default: the one the run rests on, `rest_index`), and Replay plays it at its
    measured times. The figures shown at the end are the run's measured ones; `shared` (shared_note)
    follows them. The session remembers the value's nonce (`follow_player` answers only that player)."""
    from ..race_result import lane_name

    records, summary = session.records, session.summary
    paced = pacing > 0
    times = [pacing * i for i in range(len(records))] if paced else None  # the first at once: the panels show it
    name = lane_name(summary) if summary is not None else (records[0].method if records else "")
    lane = lane_data("▶", records, summary, name=name, times=times)
    rest = rest_index(records)
    result = ""
    if summary is not None:
        figures = dict(seconds=f"{summary.wall_seconds:.2f}", tps=f"{summary.tokens_per_second:.1f}")
        result = (tr("play.decoded_paced", lang, pacing=f"{pacing:g}", **figures) if paced
                  else tr("play.decoded", lang, **figures)) + (f" {shared}" if shared else "")
    n = len(records)
    if paced:
        title = tr("play.title_paced", lang, n=n, pacing=f"{pacing:g}")
    elif session.source in ("trace", "example"):
        title = tr("play.title_saved", lang, n=n) + (f" ({session.title})" if session.title else "")
    else:
        title = tr("play.title_run" if summary is not None else "play.title_run_so_far", lang, n=n)
    data = player_data([lane], title=title, prompt=session.settings.prompt if session.settings is not None else "",
                       result=result, paced=paced, sync="explainer", rest=rest,
                       current=None if paced else (rest if current is None else current))
    session.playback_id = data["nonce"]
    return data


def idle_playback(session: Session, message: str | None = None, lang: str | None = None) -> dict:
    """The player's empty value (a message, default: where runs play); the panels no longer answer an
    older player."""
    data = empty_data(tr("play.idle", lang) if message is None else message)
    session.playback_id = data["nonce"]
    return data
