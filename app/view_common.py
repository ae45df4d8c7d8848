"""Small helpers of the explainer's views: which iteration and which draft position to show."""

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
