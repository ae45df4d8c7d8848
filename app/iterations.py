"""Which iteration and which draft position a view shows (the Explainer's views, the figures for slides and
the links share them)."""

from __future__ import annotations


def iteration_index(records: list, upto) -> int:
    """The record index to show: `upto` clamped to the run, the last one by default."""
    n = len(records)
    if upto is None:
        return n - 1
    try:
        return max(0, min(int(upto), n - 1))
    except (TypeError, ValueError):
        return n - 1


def position_index(position) -> int | None:
    """UI draft position (1-based, 0 = auto: first rejection) -> record index or None."""
    try:
        p = int(position)
    except (TypeError, ValueError):
        return None
    return p - 1 if p >= 1 else None


def rest_index(records: list) -> int:
    """The iteration a finished run is shown at: its last informative one, i.e. the last with a
    draft (a run's final iteration is often a lone token with no room left to draft); the last
    iteration for a run that never drafts (plain decoding). -1 for no records."""
    return next((i for i in range(len(records) - 1, -1, -1) if records[i].draft), len(records) - 1)


def timeline_index(value) -> int | None:
    """The timeline's value (iterations counted from 1, as people count) -> a record index; None
    for no value (the last iteration)."""
    if value is None:
        return None
    try:
        return int(value) - 1
    except (TypeError, ValueError):
        return None
