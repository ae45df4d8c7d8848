"""Trace records -> small plotly figures (p vs q bars, residual, theory, lab; the running charts: charts_running.py).

Figures are re-sent whole on every update, so they stay small (at most ~12 bars, no animation)
and are built as plain plotly JSON (`Fig`, a dict) rather than `plotly.graph_objects`: building a
validated go.Figure costs ~40 ms here, a dict well under 1 ms, which keeps rendering far below
the decoding time. gr.Plot sends `Fig.to_json()` to plotly.js like any plotly figure.
Colours are Okabe-Ito, shared with the chips in `render.py`. Every figure carries a plotly config
whose camera button ("Download plot as a PNG") exports it `EXPORT_WIDTH` pixels wide, large enough
for a slide (`_fig`); a bar series that must be told apart from another also differs in pattern or
outline, not only in colour. Lines of titles and labels stay short enough for a phone (`_wrap`).
"""

from __future__ import annotations

import json
import textwrap

from decoding.rules import theory
from decoding.trace.record import BONUS, CORRECTION, Candidate, IterationRecord

from .html_text import visible
from .i18n import t
from .rules_text import candidates
from .settings import MAX_GAMMA

P_COLOUR = "#0072B2"  # target p: blue
Q_COLOUR = "#E69F00"  # draft q: orange
EMP_COLOUR = "#009E73"  # empirical: bluish green
EXP_COLOUR = "#CC79A7"  # expected: reddish purple
RES_COLOUR = "#D55E00"  # residual: vermillion
HI_LINE = "#000000"
MAX_BARS = 12
HEIGHT = 280
GRID = "#e8e8e8"
EXPORT_WIDTH = 1600  # px of a downloaded PNG: laid out 800 px wide, drawn at scale 2
TITLE_CHARS = 52  # a title line's length at most (12 px type in a phone's ~330 px wide plot)
TITLE_LINE = 16  # px each further title line adds to the figure


class Fig(dict):
    """A plotly figure as plain JSON data: {"data": [...], "layout": {...}}."""

    def to_json(self) -> str:
        return json.dumps(self)

    @property
    def data(self) -> list[dict]:
        return self["data"]

    @property
    def layout(self) -> dict:
        return self["layout"]

    def text(self) -> str:
        """Everything in the figure as one string (for tests and search)."""
        return json.dumps(self, ensure_ascii=False)


def _fig(data: list[dict], title: str, height: int = HEIGHT, **layout) -> Fig:
    # a long title wraps (a phone's plot is ~330 px wide) and the figure grows by the extra lines
    if title and "<br>" not in title:
        title = _wrap(title, TITLE_CHARS, 4)
    extra = TITLE_LINE * title.count("<br>") if title else 0
    height += extra
    base = {
        # below the gr.Plot label, which covers the figure's top-left corner
        "title": {"text": title, "font": {"size": 12}, "x": 0.01, "xanchor": "left", "xref": "container",
                  "y": 1 - 36 / height, "yanchor": "top", "yref": "container"},
        "height": height,
        "margin": {"l": 44, "r": 10, "t": 80, "b": 40},
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1, "xanchor": "right", "font": {"size": 11}},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "bargap": 0.2,
        "font": {"family": "sans-serif", "size": 12},
        "xaxis": {"gridcolor": GRID, "automargin": True},
        "yaxis": {"gridcolor": GRID, "zerolinecolor": "#bbb", "automargin": True},
        "annotations": [],
        "shapes": [],
    }
    if data and all(t.get("type") == "bar" or t.get("x") is None or t.get("mode") == "markers" for t in data) \
            and any(t.get("type") == "bar" for t in data):
        base["xaxis"]["type"] = "category"  # token texts like "8" must not become a numeric axis
    for key, value in layout.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    base["margin"]["t"] = base["margin"].get("t", 80) + extra
    # Gradio's plot hands `config` to plotly.js: the camera button exports the figure laid out 800 px
    # wide at twice the scale, i.e. EXPORT_WIDTH px wide with type as large relative to the plot as on screen
    config = {"displaylogo": False,
              "toImageButtonOptions": {"format": "png", "filename": "speculative-decoding-chart",
                                       "width": EXPORT_WIDTH // 2, "height": height, "scale": 2}}
    return Fig(data=data, layout=base, config=config)


def ct(key: str, lang: str | None = None, **params) -> str:
    """A chart's text `explainer.chart.<key>` in `lang` (None: the event's language)."""
    return t("explainer.chart." + key, lang, **params)


def _verdict(accepted, lang) -> str:
    return ct({True: "accepted", False: "rejected", None: "not_examined"}[accepted], lang)


def _wrap(text: str, width: int = 45, lines: int = 4) -> str:
    return "<br>".join(textwrap.wrap(text, width)[:lines])


def energy_reason(note: str | None, lang: str | None = None) -> str:
    """Why a run has no energy figure, as a plain sentence: the engine's note names counters and
    machine paths ("RAPL not readable (/sys/class/powercap absent)"), which a student need not read."""
    text = (note or "").lower()
    if "turned off" in text:
        return ct("energy_off", lang)
    if "rapl" in text:
        return ct("energy_rapl_no_gpu" if "no nvidia gpu" in text else "energy_rapl", lang)
    if "nvml" in text or "gpu" in text:
        return ct("energy_gpu", lang)
    if "device type" in text:
        return ct("energy_device", lang)
    return ct("energy_none", lang)


def optimal_gamma_words(alpha: float, c: float, limit: int = MAX_GAMMA, factors: bool = True,
                        lang: str | None = None) -> tuple[int, str]:
    """(the best γ the γ slider can set, a phrase saying so): Theorem 3.8's optimum within 1..limit,
    and, where the unlimited optimum lies beyond the slider, that one too; `factors`: with their
    improvement factors."""
    best = theory.optimal_gamma(alpha, c, max_gamma=limit)
    free = theory.optimal_gamma(alpha, c, max_gamma=64)

    def factor(g: int) -> str:
        return f" (×{theory.improvement_factor(alpha, g, c):.2f})" if factors else ""

    words = ct("optimal_gamma", lang, gamma=best) + factor(best)
    if free > best:
        words += ct("optimal_beyond", lang, gamma=free) + factor(free)
    return best, words


def empty_figure(message: str, title: str = "") -> Fig:
    return _fig([], title, height=200,
                xaxis={"visible": False}, yaxis={"visible": False},
                annotations=[{"text": _wrap(message), "showarrow": False, "x": 0.5, "y": 0.5,
                              "xref": "paper", "yref": "paper", "font": {"size": 12}}])


def _labels(cands: list[Candidate]) -> list[str]:
    """Unique category labels (plotly merges equal categories): token text, id when repeated."""
    seen: dict[str, int] = {}
    for c in cands:
        seen[visible(c.text)] = seen.get(visible(c.text), 0) + 1
    return [visible(c.text) if seen[visible(c.text)] == 1 else f"{visible(c.text)} [{c.token_id}]" for c in cands]


def _top_with(cands: list[Candidate], extra: Candidate | None) -> list[Candidate]:
    cands = list(cands[:MAX_BARS])
    if extra is not None and all(c.token_id != extra.token_id for c in cands):
        cands = cands[: MAX_BARS - 1] + [extra]
    return cands


def _bar(x, y, name, colour, widths=None, pattern=None, **kw) -> dict:
    marker = {"color": colour}
    if widths is not None:
        marker["line"] = {"width": widths, "color": HI_LINE}
    if pattern:
        marker["pattern"] = {"shape": pattern}
    return {"type": "bar", "x": x, "y": y, "name": name, "marker": marker, **kw}


def _highlight(fig: Fig, labels: list[str], cands: list[Candidate], token_id: int, note: str, y: float) -> None:
    fig.layout["yaxis"]["range"] = [0, max(y, 1e-9) * 1.35]
    for label, c in zip(labels, cands):
        if c.token_id == token_id:
            fig.layout["annotations"].append({"x": label, "y": y, "text": f"<b>{note}</b>", "showarrow": True,
                                              "arrowhead": 2, "ay": -28, "font": {"size": 11}})


def default_position(record: IterationRecord) -> int:
    """The draft position the p-vs-q panel shows by default: the first rejection, else the last."""
    for d in record.draft:
        if d.accepted is False:
            return d.position
    return record.draft[-1].position if record.draft else 0


def pq_figure(record: IterationRecord | None, position: int | None = None, lang: str | None = None) -> Fig:
    """p vs q over the top tokens at one draft position, the drafted token highlighted."""
    p_name, q_name, prob = ct("p_target", lang), ct("q_draft", lang), {"title": {"text": ct("probability", lang)}}
    if record is None:
        return empty_figure(ct("no_iteration", lang), ct("pq_title", lang))
    i = record.iteration + 1
    if not record.draft:
        token = record.emitted[0] if record.emitted else None
        cands = _top_with(record.next_top, None)
        if not cands:
            return empty_figure(ct("lean", lang), p_name)
        labels = _labels(cands)
        widths = [3 if token and c.token_id == token.token_id else 0 for c in cands]
        fig = _fig([_bar(labels, [c.p for c in cands], p_name, P_COLOUR, widths)], ct("pq_no_draft", lang, i=i))
        if token is not None:
            _highlight(fig, labels, cands, token.token_id, ct("drawn", lang, token=visible(token.text)),
                       max(c.p for c in cands))
        return fig
    if position is None or not (0 <= position < len(record.draft)):
        position = default_position(record)
    d = record.draft[position]
    if candidates(record):  # no draft distribution: the candidate came from a guess (PPD: a prompt token's)
        cands = _top_with(d.top, Candidate(d.token_id, d.text, d.p))
        if not cands:
            return empty_figure(ct("lean", lang), p_name)
        labels = _labels(cands)
        fig = _fig([_bar(labels, [c.p for c in cands], p_name, P_COLOUR,
                         [3 if c.token_id == d.token_id else 0 for c in cands])],
                   ct("pq_candidate", lang, i=i, depth=position + 1, token=repr(visible(d.text)), q=f"{d.q:.2f}"),
                   yaxis=prob)
        _highlight(fig, labels, cands, d.token_id,
                   ct("candidate", lang, token=visible(d.text), verdict=_verdict(d.accepted, lang)),
                   max(c.p for c in cands))
        return fig
    cands = _top_with(d.top, Candidate(d.token_id, d.text, d.p, d.q))
    labels = _labels(cands)
    widths = [3 if c.token_id == d.token_id else 0 for c in cands]
    fig = _fig(
        [_bar(labels, [c.p for c in cands], p_name, P_COLOUR, widths),
         _bar(labels, [c.q or 0.0 for c in cands], q_name, Q_COLOUR, widths, pattern="/")],
        ct("pq_position", lang, i=i, position=position + 1, overlap=f"{d.overlap:.2f}"),
        barmode="group", yaxis=prob,
    )
    _highlight(fig, labels, cands, d.token_id, ct("drafted", lang, token=visible(d.text),
                                                   verdict=_verdict(d.accepted, lang)),
               max(max(c.p, c.q or 0) for c in cands))
    return fig


def residual_figure(record: IterationRecord | None, lang: str | None = None) -> Fig:
    """The normalized residual the correction token was drawn from, that token highlighted."""
    title = ct("residual_title", lang)
    if record is None:
        return empty_figure(ct("no_iteration", lang), title)
    if record.residual is None:
        final = next((t for t in record.emitted if t.kind == BONUS), None)
        if final is not None:
            return empty_figure(ct("residual_bonus", lang, token=repr(visible(final.text))), title)
        if any(t.kind == CORRECTION for t in record.emitted):
            return empty_figure(ct("residual_none_method", lang, method=record.method), title)
        return empty_figure(ct("residual_no_rejection", lang), title)
    res = record.residual
    cands = _top_with(res.top, None)
    if not cands:
        return empty_figure(ct("residual_lean", lang, token=repr(visible(res.text))), title)
    labels = _labels(cands)
    widths = [3 if c.token_id == res.token_id else 0 for c in cands]
    note = ct("residual_fell_back", lang) if res.fell_back_to_p else ""
    fig = _fig([_bar(labels, [c.p for c in cands], ct("residual", lang), RES_COLOUR, widths)],
               ct("residual_iteration", lang, i=record.iteration + 1, mass=f"{res.mass:.3f}") + note,
               yaxis={"title": {"text": ct("probability", lang)}})
    _highlight(fig, labels, cands, res.token_id, ct("drawn", lang, token=visible(res.text)), max(c.p for c in cands))
    return fig


def _rows_layout(n: int, titles: list[str], gap: float = 0.1, lang: str | None = None) -> dict:
    """Stacked subplots sharing the x axis: layout entries xaxis/yaxis{,2,3} and row titles."""
    height = (1 - gap * (n - 1)) / n
    layout: dict = {"annotations": []}
    for i in range(n):
        top = 1 - i * (height + gap)
        suffix = "" if i == 0 else str(i + 1)
        layout[f"yaxis{suffix}"] = {"domain": [top - height, top], "gridcolor": GRID, "automargin": True,
                                    "zerolinecolor": "#bbb", "rangemode": "tozero"}
        layout[f"xaxis{suffix}"] = {"anchor": f"y{suffix}", "gridcolor": GRID, "showticklabels": i == n - 1}
        if i:
            layout[f"xaxis{suffix}"]["matches"] = "x"
        layout["annotations"].append({"text": titles[i], "x": 0.5, "y": top, "xref": "paper", "yref": "paper",
                                      "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                                      "font": {"size": 11}})
    layout[f"xaxis{'' if n == 1 else n}"]["title"] = {"text": ct("iteration", lang)}
    return layout


def theory_figure(alpha: float, c: float, gamma: int, max_gamma: int = 16, lang: str | None = None) -> Fig:
    """Expected tokens per target call and improvement factor vs gamma (Leviathan eq. 1, Thm 3.8)."""
    top = max(max_gamma, gamma + 2)
    rows = theory.improvement_curve(alpha, c, range(1, top + 1))
    best, best_words = optimal_gamma_words(alpha, c, min(MAX_GAMMA, top), factors=False, lang=lang)
    gs = [r["gamma"] for r in rows]
    data = [
        {"type": "scatter", "mode": "lines+markers", "x": gs, "y": [r["expected_tokens"] for r in rows],
         "name": ct("expected_tokens", lang), "line": {"color": P_COLOUR}},
        {"type": "scatter", "mode": "lines+markers", "x": gs, "y": [r["improvement"] for r in rows],
         "name": ct("improvement", lang), "line": {"color": "#009E73"}, "xaxis": "x2", "yaxis": "y2"},
    ]
    if best <= top:
        data.append({"type": "scatter", "mode": "markers", "x": [best], "y": [theory.improvement_factor(alpha, best, c)],
                     "marker": {"symbol": "star", "size": 14, "color": "#E69F00"},
                     "name": ct("optimal_gamma", lang, gamma=best), "xaxis": "x2", "yaxis": "y2"})
    shapes = [
        {"type": "line", "xref": "x", "yref": "y domain", "x0": gamma, "x1": gamma, "y0": 0, "y1": 1,
         "line": {"color": "#000", "dash": "dot"}},
        {"type": "line", "xref": "x2", "yref": "y2 domain", "x0": gamma, "x1": gamma, "y0": 0, "y1": 1,
         "line": {"color": "#000", "dash": "dot"}},
        {"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
         "line": {"color": "#D55E00", "dash": "dash"}},
    ]
    axis = {"gridcolor": GRID, "title": {"text": ct("gamma_axis", lang)}}
    titles = [
        {"text": ct("theory_left", lang), "x": 0.22, "y": 1.0, "xref": "paper", "yref": "paper",
         "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 11}},
        {"text": ct("theory_right", lang), "x": 0.78, "y": 1.0, "xref": "paper",
         "yref": "paper", "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 11}},
    ]
    return _fig(
        data, ct("theory_title", lang, alpha=f"{alpha:.2f}", c=f"{c:.3f}", gamma=gamma, best=best_words), height=320,
        xaxis={**axis, "domain": [0, 0.44]}, xaxis2={**axis, "domain": [0.56, 1], "anchor": "y2"},
        yaxis={"gridcolor": GRID, "rangemode": "tozero"}, yaxis2={"gridcolor": GRID, "anchor": "x2", "rangemode": "tozero"},
        shapes=shapes, annotations=titles, legend={"y": -0.42, "yanchor": "top", "x": 0, "xanchor": "left"},
        margin={"b": 110},
    )


LAB_MANY_TOKENS = 12  # above this many tokens the lab's bars get upright labels and the legend moves down


def lab_figure(vocab: list[str], result: dict) -> Fig:
    labels = [visible(v) for v in vocab]
    data = [
        _bar(labels, result["target"], ct("p_target"), P_COLOUR),
        _bar(labels, result["draft"], ct("q_draft"), Q_COLOUR, pattern="/"),
        _bar(labels, result["expected"], t("lab.chart.expected"), EXP_COLOUR),
        # the samples: dotted and outlined, so they differ from the expected bars without colour
        {**_bar(labels, result["empirical"], t("lab.chart.empirical", n=f"{result['n']:,}"), EMP_COLOUR,
                pattern="."), "marker": {"color": EMP_COLOUR, "pattern": {"shape": ".", "fgcolor": "#00402e",
                                                                         "solidity": 0.35},
                                         "line": {"width": 2, "color": "#00402e"}}},
    ]
    if result["lenience"] < 1:
        data.append({"type": "scatter", "mode": "markers", "x": labels, "y": result["cap"],
                     "name": t("lab.chart.cap"),
                     "marker": {"symbol": "line-ew-open", "size": 28, "color": "#000000",
                                "line": {"width": 3, "color": "#000000"}}})
    n, tv = f"{result['n']:,}", f"{result['tv_to_expected']:.4f}"
    title = t("lab.chart.title", n=n, tv=tv)
    if result.get("implementation", "correct") != "correct":  # a mistake: how far from p, too
        title = t("lab.chart.title_mistake", n=n, tv=tv, tvp=f"{result['tv_to_target']:.4f}")
    if len(vocab) > LAB_MANY_TOKENS:  # e.g. 47 tokens: upright labels; the legend at the figure's foot, below them
        return _fig(data, title, height=540, barmode="group", bargap=0.1, yaxis={"title": {"text": ct("probability")}},
                    xaxis={"tickangle": -90, "tickfont": {"size": 10}}, margin={"b": 170},
                    legend={"y": 0, "yref": "container", "yanchor": "bottom", "x": 0, "xanchor": "left"})
    return _fig(data, title, height=380,
                barmode="group", yaxis={"title": {"text": ct("probability")}}, margin={"b": 90},
                legend={"y": -0.12, "yanchor": "top", "x": 0, "xanchor": "left"})


def lab_residual_figure(vocab: list[str], result: dict) -> Fig:
    title = t("lab.chart.residual_title" if result.get("implementation", "correct") == "correct"
              else "lab.chart.residual_title_mistake")
    if result["residual"] is None:
        # alpha = 1 under this rule: p = q for the strict rule, or a lenience or KL budget that keeps every draft
        return empty_figure(t("lab.chart.no_residual"), title)
    return _fig([_bar([visible(v) for v in vocab], result["residual"], t("lab.chart.residual"), RES_COLOUR)], title, height=260)


def tv_figure(history: list[tuple[int, float]]) -> Fig:
    if not history:
        return empty_figure(t("lab.chart.tv_empty", button=t("lab.converge")), t("lab.chart.tv_title_empty"))
    return _fig(
        [{"type": "scatter", "mode": "lines+markers", "x": [h[0] for h in history], "y": [h[1] for h in history],
          "name": t("lab.chart.tv_name"), "line": {"color": EMP_COLOUR}}],
        t("lab.chart.tv_title"), height=260,
        xaxis={"type": "log", "title": {"text": t("lab.chart.tv_axis_n")}},
        yaxis={"title": {"text": t("lab.chart.tv_axis")}, "rangemode": "tozero"},
    )


def _finite(x) -> float | None:
    """A JSON-safe number (plotly.js cannot parse Infinity/NaN): None where not finite."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None
