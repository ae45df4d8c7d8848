"""The method panels' plotly figures: mentored acceptance against the strict rule and the mentored
output distribution, MJSD's joint ratio per prefix against tau, PPD's hardware-aware tree size
(L(n), T(n), Speedup(n)). Built as plain plotly JSON like every chart of the app (`charts.py`)."""

from __future__ import annotations

from decoding.methods.mentored import MentoredPosition, MentoredStep
from decoding.methods.mjsd.generator import MjsdStep
from decoding.trace.record import Candidate, IterationRecord

from .charts import ct
from .charts import (EXP_COLOUR, HI_LINE, MAX_BARS, P_COLOUR, Q_COLOUR, Fig, _bar, _fig, _finite, _highlight,
                     _labels, _rows_layout, empty_figure)
from .html_text import visible


MENTORED_COLOUR = "#009E73"  # mentored acceptance / output: bluish green
STRICT_COLOUR = "#999999"  # strict acceptance: grey
TAU_COLOUR = "#D55E00"


def mentored_position(record: IterationRecord, position: int | None) -> MentoredPosition | None:
    """The examined position's mentored data: `position` (0-based draft position) if examined,
    else the first rejected position, else the one with the largest KL(p || output)."""
    info = MentoredStep.of(record)
    rows = info.positions if info is not None else []
    if not rows:
        return None
    by_pos = {r.position: r for r in rows}
    if position is not None and position in by_pos:
        return by_pos[position]
    rejected = next((d.position for d in record.draft if d.accepted is False), None)
    if rejected in by_pos:
        return by_pos[rejected]
    return max(rows, key=lambda r: _finite(r.kl_to_target) or 0.0)  # where the bound matters most


def _draft_label(record: IterationRecord, position: int) -> str:
    d = record.draft[position] if 0 <= position < len(record.draft) else None
    return f"{position + 1}: {visible(d.text)}" if d is not None else str(position + 1)


def mentored_acceptance_figure(record: IterationRecord | None) -> Fig:
    """Per examined draft position: strict min(1, p/q) vs mentored r(x) with the coin and the rule
    (top row); KL(p || q) vs KL(p || output) against the bound D (bottom row)."""
    title = ct("m.mentored_title")
    info = MentoredStep.of(record)
    if record is None or not record.draft:
        return empty_figure(ct("m.no_draft"), title)
    if info is None or not info.positions:
        return empty_figure(ct("m.mentored_lean"), title)
    rows = info.positions
    bound = _finite(info.kl_bound) or 0.0
    labels = [_draft_label(record, r.position) for r in rows]
    strict = [_finite(r.strict_threshold) or 0.0 for r in rows]
    mentored = [_finite(r.threshold) or 0.0 for r in rows]
    coins, verdicts = [], []
    for r in rows:
        pos = r.position
        d = record.draft[pos] if 0 <= pos < len(record.draft) else None
        coins.append(_finite(d.coin) if d is not None else None)
        verdicts.append("✓" if d is not None and d.accepted else "✗")
    kl_q = [_finite(r.kl_draft) for r in rows]
    kl_out = [_finite(r.kl_to_target) or 0.0 for r in rows]
    top = max([bound, *kl_out, *(k for k in kl_q if k is not None)] or [1.0]) or 1.0
    cap = top * 1.15
    kl_q_shown = [min(k, cap) if k is not None else cap for k in kl_q]
    kl_q_text = ["∞" if k is None else (f"{k:.2f}" + ("…" if k > cap else "")) for k in kl_q]
    layout = _rows_layout(2, [ct("m.mentored_row1"), ct("m.mentored_row2", bound=f"{bound:g}")], gap=0.2)
    layout["yaxis"]["range"] = [0, 1.25]
    layout["xaxis2"]["title"] = {"text": ""}
    layout["xaxis"]["type"] = layout["xaxis2"]["type"] = "category"
    data = [
        _bar(labels, strict, ct("m.strict"), STRICT_COLOUR, pattern="/"),
        _bar(labels, mentored, ct("m.mentored"), MENTORED_COLOUR, text=[f"{m:.2f} {v}" for m, v in zip(mentored, verdicts)],
             textposition="outside", textangle=0, cliponaxis=False),
        {"type": "scatter", "mode": "markers", "x": labels, "y": coins, "name": ct("m.coin"),
         "marker": {"symbol": "line-ew-open", "size": 34, "color": HI_LINE, "line": {"width": 3, "color": HI_LINE}}},
        _bar(labels, kl_q_shown, ct("m.kl_q"), Q_COLOUR, pattern="/", text=kl_q_text,
             textposition="outside", xaxis="x2", yaxis="y2"),
        _bar(labels, kl_out, ct("m.kl_out"), EXP_COLOUR, text=[f"{k:.3f}" for k in kl_out],
             textposition="outside", xaxis="x2", yaxis="y2"),
    ]
    layout["yaxis2"]["range"] = [0, cap * 1.3]
    # which rule decided, as the top row's tick labels
    layout["xaxis"].update({"showticklabels": True, "tickmode": "array", "tickvals": labels,
                            "ticktext": [f"<i>{r.rule or '?'}</i>" for r in rows]})
    layout["shapes"] = [{"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1, "y0": bound, "y1": bound,
                         "line": {"color": "#000", "dash": "dash", "width": 2}}]
    return _fig(data, ct("m.mentored_fig", i=record.iteration + 1, bound=f"{bound:g}"),
                height=480, barmode="group", margin={"t": 70, "b": 110},
                legend={"y": -0.12, "yanchor": "top", "x": 0, "xanchor": "left"}, **layout)


def mentored_output_figure(record: IterationRecord | None, position: int | None = None) -> Fig:
    """At one examined position: the mentored output distribution vs p and q, with KL(p || output) vs D."""
    title = ct("m.output_title")
    info = MentoredStep.of(record)
    row = mentored_position(record, position) if record is not None else None
    if row is None:
        return empty_figure(ct("m.mentored_none"), title)
    top = row.output_top[:MAX_BARS]
    if not top:
        return empty_figure(ct("lean"), title)
    pos = row.position
    d = record.draft[pos] if 0 <= pos < len(record.draft) else None
    cands = [Candidate(c.token_id, c.text, 0.0) for c in top]
    labels = _labels(cands)
    widths = [3 if d is not None and c.token_id == d.token_id else 0 for c in cands]
    bound = _finite(info.kl_bound if info else None) or 0.0
    kl = _finite(row.kl_to_target) or 0.0
    data = [
        _bar(labels, [_finite(c.p) or 0.0 for c in top], ct("p_target"), P_COLOUR, widths),
        _bar(labels, [_finite(c.q) or 0.0 for c in top], ct("q_draft"), Q_COLOUR, widths, pattern="/"),
        _bar(labels, [_finite(c.output) or 0.0 for c in top], ct("m.output"), EXP_COLOUR, widths),
    ]
    fig = _fig(data, ct("m.output_fig", position=pos + 1, kl=f"{kl:.3f}", bound=f"{bound:g}"), height=340,
               barmode="group", yaxis={"title": {"text": ct("probability")}}, margin={"b": 90},
               legend={"y": -0.25, "yanchor": "top", "x": 0, "xanchor": "left"})
    if d is not None:
        verdict = ct({True: "accepted", False: "rejected", None: "not_examined"}[d.accepted])
        ymax = max(max(_finite(v) or 0.0 for v in (c.p, c.q, c.output)) for c in top)
        _highlight(fig, labels, cands, d.token_id, ct("drafted", token=visible(d.text), verdict=verdict), ymax)
    return fig


def _sub(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def mjsd_ratio_figure(record: IterationRecord | None) -> Fig:
    """The joint ratio min(1, p(x_1..j)/q(x_1..j)) against the prefix length j, with the tau line and
    the kept prefix eta (top row); log p and log q of the prefixes (bottom row)."""
    title = ct("m.mjsd_title")
    info = MjsdStep.of(record)
    if record is None or info is None:
        return empty_figure(ct("m.mjsd_none"), title)
    prefixes = info.prefixes
    if not prefixes:
        return empty_figure(ct("m.mjsd_no_room"), title)
    tau = _finite(info.tau) or 0.0
    eta = info.eta or 0
    js = [r.length or i + 1 for i, r in enumerate(prefixes)]
    ratios = [_finite(r.ratio) or 0.0 for r in prefixes]
    passes = [bool(r.passes) for r in prefixes]
    ticks = [f"j = {j}<br>{visible(record.draft[j - 1].text) if j - 1 < len(record.draft) else ''}" for j in js]
    hover = [ct("m.mjsd_hover_pass" if ok else "m.mjsd_hover_fail", j=j, ratio=f"{r:.3g}", tau=f"{tau:g}")
             for j, r, ok in zip(js, ratios, passes)]
    layout = _rows_layout(2, [ct("m.mjsd_row1"), ct("m.mjsd_row2")], gap=0.2)
    for axis in ("xaxis", "xaxis2"):
        layout[axis].update({"tickmode": "array", "tickvals": js, "ticktext": ticks, "range": [0.5, max(js) + 0.5]})
    layout["xaxis2"]["title"] = {"text": ct("m.mjsd_axis")}
    layout["yaxis"]["range"] = [0, 1.3]  # room above ratio 1 for the eta label
    log_p = [_finite(r.log_p) for r in prefixes]
    log_q = [_finite(r.log_q) for r in prefixes]
    data = [
        {"type": "scatter", "mode": "lines", "x": js, "y": ratios, "name": "joint ratio", "hoverinfo": "skip",
         "line": {"color": P_COLOUR}},
        *({"type": "scatter", "mode": "markers", "name": name, "hoverinfo": "text",
           "x": [j for j, ok in zip(js, passes) if ok is want], "y": [r for r, ok in zip(ratios, passes) if ok is want],
           "text": [h for h, ok in zip(hover, passes) if ok is want],
           "marker": {"size": 12, "color": colour, "symbol": symbol, "line": {"width": 1, "color": "#000"}}}
          for name, want, colour, symbol in ((ct("m.mjsd_passes"), True, MENTORED_COLOUR, "circle"),
                                             (ct("m.mjsd_fails"), False, TAU_COLOUR, "x"))),
        {"type": "scatter", "mode": "lines+markers", "x": js, "y": log_q, "name": ct("m.mjsd_log_q"),
         "line": {"color": Q_COLOUR, "dash": "dash"}, "xaxis": "x2", "yaxis": "y2"},
        {"type": "scatter", "mode": "lines+markers", "x": js, "y": log_p, "name": ct("m.mjsd_log_p"),
         "line": {"color": P_COLOUR}, "xaxis": "x2", "yaxis": "y2"},
    ]
    layout["yaxis2"]["rangemode"] = "normal"
    layout["shapes"] = [{"type": "line", "xref": "x domain", "yref": "y", "x0": 0, "x1": 1, "y0": tau, "y1": tau,
                         "line": {"color": TAU_COLOUR, "dash": "dash", "width": 2}}]
    layout["annotations"].append({"text": f"τ = {tau:g}", "x": 1, "y": tau, "xref": "x domain", "yref": "y",
                                  "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                                  "font": {"size": 12, "color": TAU_COLOUR}})
    if eta > 0:
        layout["shapes"].append({"type": "rect", "xref": "x", "yref": "y domain", "x0": 0.5, "x1": eta + 0.5, "y0": 0,
                                 "y1": 1, "fillcolor": "rgba(0,158,115,0.12)", "line": {"width": 0}, "layer": "below"})
        layout["shapes"].append({"type": "line", "xref": "x", "yref": "y domain", "x0": eta + 0.5, "x1": eta + 0.5,
                                 "y0": 0, "y1": 1, "line": {"color": MENTORED_COLOUR, "width": 2}})
        kept = ct("m.mjsd_kept", eta=eta, sub=_sub(eta))
    else:
        kept = ct("m.mjsd_none_kept")
    layout["annotations"].append({"text": f"<b>{kept}</b>", "x": 0.01, "y": 1.0, "xref": "x domain", "yref": "y domain",
                                  "xanchor": "left", "yanchor": "top", "showarrow": False,
                                  "font": {"size": 11, "color": "#00704f" if eta else "#b34700"},
                                  "bgcolor": "rgba(255,255,255,0.85)"})
    if any(v is None for v in log_p):
        first = next(j for j, v in zip(js, log_p) if v is None)
        layout["annotations"][1]["text"] += f"<br>p = 0 from j = {first} on (outside the target's top-k/top-p)"
    beams = "?" if info.beams is None else info.beams
    return _fig(data, ct("m.mjsd_fig", i=record.iteration + 1, beams=beams, tau=f"{tau:g}", drafted=len(js), eta=eta),
                height=480, margin={"t": 70, "b": 120},
                legend={"y": -0.24, "yanchor": "top", "x": 0, "xanchor": "left"}, **layout)

LAT_COLOUR = "#D55E00"  # L(n): vermillion
TPS_COLOUR = "#0072B2"  # T(n): blue
SPEED_COLOUR = "#009E73"  # Speedup(n): bluish green
CHOSEN_COLOUR = "#E69F00"  # the chosen n*: orange star


def ppd_tuning_figure(tuning: dict | None, run_size: int | None = None, found: bool = True) -> Fig:
    """The hardware-aware tree size (Chen et al., section 4.2) as three stacked rows sharing n: L(n), the
    latency of one PPD step (ms), T(n), tokens per step, and the relative Speedup(n) = T(n)/L(n),
    with the chosen n* (star, dotted line) and this run's tree size (dashed, when different)."""
    title = ct("m.ppd_title")
    if not tuning or not tuning.get("n"):
        from .render import tr

        why = tr("m.ppd_not_tuned" if found else "m.ppd_no_tuning_data")
        return empty_figure(ct("m.ppd_no_tuning", why=why), title)
    ns = [int(n) for n in tuning["n"]]
    lat = [_finite(v) for v in tuning.get("latency_ms") or []]
    tps = [_finite(v) for v in tuning.get("tokens_per_step") or []]
    speed = [_finite(v) for v in tuning.get("speedup_rel") or []]
    model = [_finite(v) for v in tuning.get("model_tokens_per_step") or []]
    chosen = tuning.get("chosen")
    layout = _rows_layout(3, [ct("m.ppd_row1"), ct("m.ppd_row2"), ct("m.ppd_row3")], gap=0.12)
    layout["xaxis3"]["title"] = {"text": ct("m.ppd_axis")}
    for axis in ("xaxis", "xaxis2", "xaxis3"):
        layout[axis].update({"tickmode": "array", "tickvals": ns, "ticktext": [str(n) for n in ns]})
    line = lambda ys, name, colour, row, **kw: {  # noqa: E731
        "type": "scatter", "mode": "lines+markers", "x": ns, "y": ys, "name": name, "line": {"color": colour, **kw},
        "xaxis": f"x{row if row > 1 else ''}", "yaxis": f"y{row if row > 1 else ''}"}
    data = [line(lat, ct("m.ppd_latency"), LAT_COLOUR, 1),
            line(tps, ct("m.ppd_tps"), TPS_COLOUR, 2)]
    if any(v is not None for v in model):
        data.append({**line(model, ct("m.ppd_model"), "#999999", 2, dash="dot"), "mode": "lines"})
    data.append(line(speed, ct("m.ppd_speedup"), SPEED_COLOUR, 3))
    shapes = []
    if chosen in ns:
        i = ns.index(chosen)
        data.append({"type": "scatter", "mode": "markers", "x": [chosen], "y": [speed[i]], "name": ct("m.ppd_chosen", n=chosen),
                     "marker": {"symbol": "star", "size": 16, "color": CHOSEN_COLOUR, "line": {"width": 1, "color": "#000"}},
                     "xaxis": "x3", "yaxis": "y3"})
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": chosen, "x1": chosen, "y0": 0, "y1": 1,
                       "line": {"color": CHOSEN_COLOUR, "width": 2, "dash": "dot"}})
        layout["annotations"].append({"text": f"<b>n* = {chosen}</b>", "x": chosen, "y": 1, "xref": "x", "yref": "paper",
                                      "yanchor": "bottom", "xanchor": "left", "showarrow": False,
                                      "font": {"size": 11, "color": "#8a5d00"}, "yshift": 12})
    if run_size is not None and run_size != chosen:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": run_size, "x1": run_size, "y0": 0, "y1": 1,
                       "line": {"color": "#555555", "width": 1, "dash": "dash"}})
        left = chosen is not None and run_size < chosen
        layout["annotations"].append({"text": ct("m.ppd_this_run", n=run_size), "x": run_size, "y": 1, "xref": "x",
                                      "yref": "paper", "yanchor": "bottom", "xanchor": "right" if left else "left",
                                      "showarrow": False, "font": {"size": 11, "color": "#555555"}, "yshift": 12})
    layout["shapes"] = shapes
    from .render_methods import device_words

    return _fig(data, ct("m.ppd_fig", device=device_words(tuning.get("device")), n=chosen),
                height=540,
                margin={"t": 84, "b": 120}, legend={"y": -0.2, "yanchor": "top", "x": 0, "xanchor": "left"}, **layout)
