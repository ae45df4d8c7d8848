"""The Explainer's running charts: tokens/s, accepted length and energy per token (or its proxy) by
iteration, then the run's acceptance per draft position beside Leviathan et al.'s i.i.d. reference
alpha^i and its histogram of accepted lengths. Plain plotly JSON like every chart of the app
(`charts.py`); every figure comes from the records and `decoding.trace.metrics`."""

from __future__ import annotations

from decoding.eval.energy import MIN_WINDOW_SECONDS, weight_bytes_per_token
from decoding.methods.registry import METHODS
from decoding.trace.metrics import RunCounts, tokens_per_second
from decoding.trace.record import IterationRecord

from .charts import (HEIGHT, EMP_COLOUR, EXP_COLOUR, GRID, P_COLOUR, TITLE_CHARS, Fig, _fig, _rows_layout, _wrap,
                     ct, empty_figure, energy_reason)

def running_figure(records: list[IterationRecord], upto: int | None = None, baseline_tps: float | None = None,
                   target_bytes: int | None = None, draft_bytes: int | None = None, lang: str | None = None) -> Fig:
    """tokens/s, accepted length per iteration, energy per token (or its reason + the proxy), then the
    run's acceptance per draft position beside α^i and its histogram of accepted lengths, both over the
    iterations up to `upto` (`acceptance_rows`)."""
    if not records:
        return empty_figure(ct("running_empty", lang), ct("running_title", lang))
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    its = [r.iteration + 1 for r in records]  # counted from 1, as the timeline
    has_energy = any(r.energy_joules is not None for r in records)
    third = ct("energy_row" if has_energy else "proxy_row", lang)
    layout = _rows_layout(3, [ct("tps_row", lang), ct("accepted_row", lang), third], lang=lang)
    _squeeze_rows(layout, 3, RUNNING_TOP)
    data = [{"type": "scatter", "mode": "lines", "x": its, "name": ct("tps", lang), "line": {"color": P_COLOUR},
             "y": [round(tokens_per_second(r.generated, r.elapsed), 3) for r in records]}]
    if baseline_tps:
        data.append({"type": "scatter", "mode": "lines", "x": [its[0], its[-1]], "y": [baseline_tps] * 2,
                     "name": ct("baseline", lang), "line": {"color": "#555555", "dash": "dash"}})
    data.append({"type": "bar", "x": its, "y": [r.accepted_length for r in records],
                 "name": ct("accepted_length", lang),
                 "marker": {"color": "#009E73"}, "xaxis": "x2", "yaxis": "y2"})
    if any(r.gamma for r in records):
        data.append({"type": "scatter", "mode": "lines", "x": its, "y": [r.gamma for r in records],
                     "name": ct("gamma_drafted", lang), "line": {"color": "#999999", "dash": "dot", "shape": "hv"}, "xaxis": "x2", "yaxis": "y2"})
    if has_energy:
        pts = [(r.iteration + 1, r.energy_joules / r.generated) for r in records
               if r.energy_joules is not None and r.elapsed >= MIN_WINDOW_SECONDS and r.generated]
        data.append({"type": "scatter", "mode": "lines", "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                     "name": ct("joules", lang), "line": {"color": "#CC79A7"}, "xaxis": "x3", "yaxis": "y3"})
        if not pts:
            layout["annotations"].append({"text": ct("needs_seconds", lang, seconds=f"{MIN_WINDOW_SECONDS:g}"),
                                          "showarrow": False,
                                          "x": 0.5, "y": 0.5, "xref": "x3 domain", "yref": "y3 domain"})
    else:
        if target_bytes:
            ys = [weight_bytes_per_token(r.target_calls, target_bytes, r.draft_calls, draft_bytes or 0, r.generated)
                  for r in records]
            data.append({"type": "scatter", "mode": "lines", "x": its, "y": [round((y or 0) / 1e6, 3) for y in ys],
                         "name": ct("mb_proxy", lang), "line": {"color": "#CC79A7", "dash": "dash"},
                         "xaxis": "x3", "yaxis": "y3"})
        if not target_bytes:  # keep the third row's axes drawn, so its note lands in that row
            data.append({"type": "scatter", "mode": "markers", "x": its, "y": [0] * len(its), "showlegend": False,
                         "hoverinfo": "skip", "marker": {"opacity": 0}, "xaxis": "x3", "yaxis": "y3"})
        why = _wrap(energy_reason(records[-1].energy_note, lang), 52, 4)
        if not target_bytes:
            why += "<br>" + ct("proxy_unknown", lang)
        layout["annotations"].append({"text": why, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "x3 domain",
                                      "yref": "y3 domain", "font": {"size": 10}, "bgcolor": "rgba(255,255,255,0.8)"})
    layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": records[upto].iteration + 1,
                         "x1": records[upto].iteration + 1, "y0": RUNNING_TOP[0], "y1": 1,
                         "line": {"color": "#000", "width": 1, "dash": "dot"}}]
    more, more_layout = acceptance_rows(records[: upto + 1], lang)
    data += more
    layout["annotations"] += more_layout.pop("annotations")
    layout.update(more_layout)
    return _fig(data, "", height=RUNNING_HEIGHT, margin={"t": 50, "b": 60},
                legend={"y": RUNNING_TOP[0] - 0.068, "yanchor": "top", "x": 0, "xanchor": "left"},
                # the acceptance row's own legend, in its top right corner (the rates fall with the position)
                legend2={"x": 0.99, "xanchor": "right", "y": ACCEPTANCE_ROWS[0][1], "yanchor": "top",
                         "bgcolor": "rgba(255,255,255,0.85)", "font": {"size": 11}}, **layout)


# the running charts' figure: its three rows by iteration on top, then the two acceptance rows (paper heights)
RUNNING_HEIGHT = 1100
RUNNING_TOP = (0.58, 1.0)  # the rows by iteration


def _squeeze_rows(layout: dict, n: int, span: tuple[float, float]) -> None:
    """Move `_rows_layout`'s n rows (laid out over the whole height) into `span` of it."""
    lo, hi = span

    def at(y: float) -> float:
        return lo + (hi - lo) * y

    for i in range(n):
        axis = layout[f"yaxis{'' if i == 0 else i + 1}"]
        axis["domain"] = [at(axis["domain"][0]), at(axis["domain"][1])]
    for note in layout["annotations"]:
        note["y"] = at(note["y"])


ACCEPTANCE_ROWS = ((0.27, 0.385), (0.0, 0.13))  # paper heights: per draft position; histogram of accepted lengths


def _row_title(text: str, top: float) -> dict:
    return {"text": _wrap(text, TITLE_CHARS, 4), "x": 0.5, "y": top + 0.005, "xref": "paper", "yref": "paper",
            "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 11}}


def _row_note(text: str, axis: str) -> dict:
    return {"text": _wrap(text, 52, 3), "showarrow": False, "x": 0.5, "y": 0.5, "xref": f"{axis} domain",
            "yref": f"y{axis[1:]} domain", "font": {"size": 11}}


# what the per-position row counts, in words (its title in the running charts and the lesson); in English,
# `positions_title(lang)` in a language (explainer.chart.positions_title)
POSITIONS_TITLE = ("Acceptance per draft position i: of the iterations that drafted at least i tokens, the share "
                   "whose first i draft tokens were all accepted")


def positions_title(lang: str | None = None) -> str:
    return ct("positions_title", lang)


def acceptance_rows(records: list[IterationRecord], lang: str | None = None) -> tuple[list[dict], dict]:
    """Plotly traces and layout (axes x4/y4, x5/y5 in `ACCEPTANCE_ROWS`, and their titles) of a run's
    acceptance per draft position beside α^i and its histogram of accepted lengths; each row says in
    words what it counts, or why it has nothing to show (no drafts, or a method that drafts a tree).
    Every figure comes from `decoding.trace.metrics` (`RunCounts`)."""
    (lo4, hi4), (lo5, hi5) = ACCEPTANCE_ROWS
    layout: dict = {
        "xaxis4": {"anchor": "y4", "gridcolor": GRID, "dtick": 1, "title": {"text": ct("draft_position", lang)}},
        "yaxis4": {"domain": [lo4, hi4], "gridcolor": GRID, "range": [0, 1.05], "automargin": True,
                   "title": {"text": ct("share", lang)}},
        "xaxis5": {"anchor": "y5", "gridcolor": GRID, "dtick": 1,
                   "title": {"text": ct("accepted_in_one", lang)}},
        "yaxis5": {"domain": [lo5, hi5], "gridcolor": GRID, "rangemode": "tozero", "automargin": True,
                   "title": {"text": ct("iterations", lang)}},
    }
    spec = METHODS.get(records[-1].method) if records else None
    counts = RunCounts.from_records(records, per_position=spec is None or spec.chain_draft)
    tally = counts.positions
    title5 = ct("histogram_title", lang)
    if tally:
        title5 += ct("histogram_mean", lang, mean=f"{counts.mean_acceptance_length:.2f}")
    layout["annotations"] = [_row_title(positions_title(lang), hi4), _row_title(title5, hi5)]
    if not tally:
        if spec is not None and not spec.chain_draft:
            why = ct("positions_tree", lang, method=spec.title)
        elif spec is not None and spec.view.baseline:
            why = ct("positions_plain", lang)
        else:
            why = ct("positions_none", lang)
        layout["annotations"] += [_row_note(why, "x4"), _row_note(why, "x5")]
        # keep both rows' axes drawn, so each note lands in its row
        data = [{"type": "scatter", "mode": "markers", "x": [1], "y": [0], "showlegend": False, "hoverinfo": "skip",
                 "marker": {"opacity": 0}, "xaxis": axis, "yaxis": "y" + axis[1:]} for axis in ("x4", "x5")]
        return data, layout
    positions = list(range(1, tally.gamma_max + 1))
    data = [
        {"type": "bar", "x": positions, "y": [round(x, 4) for x in tally.rates], "name": ct("measured", lang),
         "marker": {"color": EMP_COLOUR}, "xaxis": "x4", "yaxis": "y4", "legend": "legend2",
         "customdata": [[r, d] for r, d in zip(tally.reached, tally.drafted)],
         "hovertemplate": ct("hover_position", lang) + "<extra></extra>"},
        {"type": "bar", "x": list(range(len(tally.lengths))), "y": tally.histogram, "name": ct("iterations", lang),
         "marker": {"color": P_COLOUR}, "xaxis": "x5", "yaxis": "y5", "showlegend": False,
         "hovertemplate": ct("hover_histogram", lang) + "<extra></extra>"},
    ]
    if counts.alpha is not None:
        data.append({"type": "scatter", "mode": "lines+markers", "x": positions, "y": counts.iid_acceptance,
                     "name": ct("iid_name", lang, alpha=f"{counts.alpha:.2f}"),
                     "line": {"color": EXP_COLOUR, "dash": "dash"}, "marker": {"symbol": "diamond"},
                     "xaxis": "x4", "yaxis": "y4", "legend": "legend2",
                     "hovertemplate": ct("hover_iid", lang) + "<extra></extra>"})
    return data, layout


def positions_figure(records: list[IterationRecord], lang: str | None = None) -> Fig:
    """The lesson's chart of a run's acceptance per draft position beside α^i: `acceptance_rows`' first
    row as a figure of its own (the same traces, words and figures as the running charts)."""
    data, layout = acceptance_rows(records, lang)
    rows = [{**{k: v for k, v in d.items() if k != "legend"}, "xaxis": "x", "yaxis": "y"}
            for d in data if d.get("xaxis") == "x4"]
    notes = [{**a, "xref": "x domain", "yref": "y domain"} for a in layout["annotations"]
             if a.get("xref") == "x4 domain"]
    xaxis = {k: v for k, v in layout["xaxis4"].items() if k != "anchor"}
    yaxis = {k: v for k, v in layout["yaxis4"].items() if k != "domain"}
    # the legend below the axis title: inside the plot it would cover the bars on a phone
    return _fig(rows, positions_title(lang), height=HEIGHT + 60, xaxis=xaxis, yaxis=yaxis, annotations=notes,
                legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.42, "yanchor": "top",
                        "font": {"size": 11}}, margin={"l": 44, "r": 10, "t": 80, "b": 120})

