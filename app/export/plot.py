"""A chart of the app (a plotly figure as plain data, `charts.Fig`) redrawn as a light-theme figure.

Why redraw instead of plotly's own export: plotly's static export in Python needs kaleido, which drives
a Chrome that a Space does not have; the browser's `Plotly.toImage` would make the export a browser
feature that the server, the tests and the CLI cannot reach. The app's charts use a small part of
plotly (bar and scatter traces on stacked subplots, annotations, line shapes), so this module draws
that part from the same figure data the live chart shows: the same numbers, in large type.

Handled: traces `bar` (vertical, grouped or overlaid; `orientation: h`) and `scatter` (lines, markers)
on axes `x`, `x2`, ... / `y`, `y2`, ... with their `domain`s; category and numeric (also log) x axes;
axis titles; `annotations` placed by paper, axis-domain or data coordinates; `shapes` of type line.
A bar with a fill pattern (the live chart's hatching for q) gets a dashed outline instead.
"""

from __future__ import annotations

import math
import re

from ..i18n import t
from .scene import Scene, text_width
from .theme import AXIS, BODY_SIZE, GRID, INK, MUTED, PAD, SMALL_SIZE, finish, start, wrap

TICK_SIZE = 16
_TAG = re.compile(r"<[^>]+>")


def plain(text) -> list[str]:
    """Plotly's HTML-ish text as plain lines (<br> splits lines, other tags dropped)."""
    text = "" if text is None else str(text)
    return [_TAG.sub("", part) for part in re.split(r"<br\s*/?>", text, flags=re.I)]


def _title_text(obj) -> str:
    if isinstance(obj, dict):
        return " ".join(plain(obj.get("text")))
    return " ".join(plain(obj)) if obj else ""


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About `n` round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 10000 or abs(v) < 0.001:
        return f"{v:.0e}"
    return f"{v:g}"


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class _Axes:
    """One subplot: its box in the scene and its x and y mappings."""

    def __init__(self, fig: dict, xid: str, yid: str, traces: list[dict], box: tuple[float, float, float, float]):
        layout = fig["layout"]
        self.xlayout = layout.get("xaxis" + xid[1:], {}) or {}
        self.ylayout = layout.get("yaxis" + yid[1:], {}) or {}
        self.box = box
        self.traces = traces
        self.horizontal = any(tr.get("orientation") == "h" for tr in traces if tr.get("type") == "bar")
        cat_vals = [tr.get("y" if self.horizontal else "x") or [] for tr in traces]
        if self.horizontal:
            self.xcat = None
            self.ycat = self._categories(cat_vals)
        else:
            is_cat = self.xlayout.get("type") == "category" or any(
                isinstance(v, str) for vals in cat_vals for v in vals)
            self.xcat = self._categories(cat_vals) if is_cat else None
            self.ycat = None
        self.xlog = self.xlayout.get("type") == "log"
        self.ylog = self.ylayout.get("type") == "log"
        self.xr = self._range("x", self.xlayout, self.xcat)
        self.yr = self._range("y", self.ylayout, self.ycat)

    @staticmethod
    def _categories(lists) -> list[str]:
        seen: list[str] = []
        for vals in lists:
            for v in vals:
                if str(v) not in seen:
                    seen.append(str(v))
        return seen

    def _range(self, key: str, axis: dict, cats):
        if cats is not None:
            return (-0.5, len(cats) - 0.5)
        given = axis.get("range")
        if given and all(_num(g) is not None for g in given):
            lo, hi = float(given[0]), float(given[1])
            return (lo, hi) if not (axis.get("type") == "log") else (10 ** lo, 10 ** hi)
        vals = [_num(v) for tr in self.traces for v in (tr.get(key) or [])]
        vals = [v for v in vals if v is not None]
        value_axis = (key == "y") != self.horizontal
        if any(tr.get("type") == "bar" for tr in self.traces) and value_axis:
            vals.append(0.0)
        if axis.get("rangemode") == "tozero":
            vals.append(0.0)
        if not vals:
            return (0.0, 1.0)
        lo, hi = min(vals), max(vals)
        if axis.get("type") == "log":
            lo, hi = max(min(v for v in vals if v > 0) if any(v > 0 for v in vals) else 1, 1e-12), max(hi, 1e-12)
            return (lo, hi * 1.0001 if hi > lo else lo * 10)
        if hi == lo:
            hi = lo + 1
        if not value_axis and any(tr.get("type") == "bar" for tr in self.traces):
            xs = sorted(set(vals))
            half = min((b - a for a, b in zip(xs, xs[1:])), default=1) / 2
            return (lo - half, hi + half)
        if value_axis:
            hi += (hi - lo) * 0.08
        else:
            pad = (hi - lo) * 0.03
            lo, hi = lo - pad, hi + pad
        return (lo, hi)

    def _map(self, v, r, log, a, b):
        if log:
            v, r = math.log10(max(v, 1e-12)), (math.log10(r[0]), math.log10(r[1]))
        return a + (v - r[0]) / ((r[1] - r[0]) or 1) * (b - a)

    def x(self, v) -> float | None:
        x0, _, x1, _ = self.box
        if self.xcat is not None:
            v = self.xcat.index(str(v)) if str(v) in self.xcat else None
        else:
            v = _num(v)
        return None if v is None else self._map(v, self.xr, self.xlog, x0, x1)

    def y(self, v) -> float | None:
        _, y0, _, y1 = self.box
        if self.ycat is not None:
            v = self.ycat.index(str(v)) if str(v) in self.ycat else None
        else:
            v = _num(v)
        return None if v is None else self._map(v, self.yr, self.ylog, y1, y0)


def _colour(trace: dict, i: int = 0) -> str:
    marker = trace.get("marker") or {}
    line = trace.get("line") or {}
    colour = line.get("color") if trace.get("type") == "scatter" and line.get("color") else marker.get("color")
    if isinstance(colour, list):
        colour = colour[i % len(colour)] if colour else None
    if not isinstance(colour, str) or not colour.startswith("#"):
        return "#333333"
    return colour


def _draw_axes(scene: Scene, ax: _Axes) -> None:
    x0, y0, x1, y1 = ax.box
    # y grid and ticks
    if ax.ycat is None:
        lo, hi = ax.yr
        ticks = [10 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)] if ax.ylog \
            else nice_ticks(lo, hi, 4)
        for v in ticks:
            y = ax.y(v)
            if y is None or y < y0 - 0.5 or y > y1 + 0.5:
                continue
            scene.line(x0, y, x1, y, GRID, 1)
            scene.text(x0 - 8, y + TICK_SIZE * 0.35, _fmt_tick(v), TICK_SIZE, INK, anchor="end")
    else:
        for i, c in enumerate(ax.ycat):
            scene.text(x0 - 8, ax.y(c) + TICK_SIZE * 0.35, c, TICK_SIZE, INK, anchor="end")
    scene.line(x0, y1, x1, y1, AXIS, 2)
    scene.line(x0, y0, x0, y1, AXIS, 2)
    # x ticks
    if ax.xcat is not None:
        slot = (x1 - x0) / max(1, len(ax.xcat))
        widest = max((text_width(c, TICK_SIZE) for c in ax.xcat), default=0)
        rows = 1 if widest + 8 <= slot else 2  # alternate two rows of labels, each then cut to two slots
        room = slot * rows - 8
        for i, c in enumerate(ax.xcat):
            label = c
            while len(label) > 1 and text_width(label, TICK_SIZE) > room:
                label = label[:-2] + "…"
            scene.text(ax.x(c), y1 + TICK_SIZE * (1.3 + 1.2 * (i % rows)), label, TICK_SIZE, INK, anchor="middle")
    elif not ax.horizontal:
        lo, hi = ax.xr
        ticks = [10 ** e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)] if ax.xlog \
            else nice_ticks(lo, hi, 6)
        for v in ticks:
            x = ax.x(v)
            if x is not None and x0 - 0.5 <= x <= x1 + 0.5:
                scene.line(x, y1, x, y1 + 6, AXIS, 2)
                scene.text(x, y1 + TICK_SIZE * 1.4, _fmt_tick(v), TICK_SIZE, INK, anchor="middle")
    xt, yt = _title_text(ax.xlayout.get("title")), _title_text(ax.ylayout.get("title"))
    if xt:
        scene.text((x0 + x1) / 2, y1 + TICK_SIZE * 3.6, xt, SMALL_SIZE, MUTED, anchor="middle")
    if yt:
        scene.text(x0, y0 - 8, yt, SMALL_SIZE, MUTED)


def _draw_traces(scene: Scene, ax: _Axes, barmode: str) -> None:
    x0, y0, x1, y1 = ax.box
    bars = [tr for tr in ax.traces if tr.get("type") == "bar"]
    cats = ax.ycat if ax.horizontal else ax.xcat
    n_cats = len(cats) if cats is not None else None
    grouped = barmode == "group" and len(bars) > 1
    for k, tr in enumerate(bars):
        xs, ys = tr.get("x") or [], tr.get("y") or []
        pattern = bool((tr.get("marker") or {}).get("pattern"))
        widths = ((tr.get("marker") or {}).get("line") or {}).get("width")
        for i, (xv, yv) in enumerate(zip(xs, ys)):
            if ax.horizontal:
                value, cat = _num(xv), yv
            else:
                value, cat = _num(yv), xv
            if value is None:
                continue
            if cats is not None:
                centre = cats.index(str(cat)) if str(cat) in cats else None
                if centre is None:
                    continue
                slot = 0.8
            else:
                centre = _num(cat)
                if centre is None:
                    continue
                xs_num = sorted({_num(v) for v in xs if _num(v) is not None})
                slot = min((b - a for a, b in zip(xs_num, xs_num[1:])), default=1) * 0.8
            width = slot / len(bars) if grouped else slot
            left = centre - slot / 2 + (k * width if grouped else 0)
            colour = _colour(tr, i)
            thick = widths[i] if isinstance(widths, list) and i < len(widths) else widths
            outline = "#000000" if thick else colour
            if ax.horizontal:
                ya, yb = ax._map(left, ax.yr, False, y1, y0), ax._map(left + width, ax.yr, False, y1, y0)
                xa, xb = ax.x(0) or x0, ax.x(value)
                scene.rect(min(xa, xb), min(ya, yb), abs(xb - xa), abs(yb - ya), colour, outline,
                           3 if thick else 1.5, dash=pattern and not thick)
            else:
                if ax.xcat is not None:
                    xa, xb = ax._map(left, ax.xr, False, x0, x1), ax._map(left + width, ax.xr, False, x0, x1)
                else:
                    xa, xb = ax.x(left), ax.x(left + width)
                base = ax.y(max(ax.yr[0], 0) if not ax.ylog else ax.yr[0])
                top = ax.y(value)
                if top is None or base is None or xa is None or xb is None:
                    continue
                fill = colour if not pattern else "#ffffff"
                scene.rect(xa, min(top, base), xb - xa, abs(base - top), fill, outline if not pattern else colour,
                           4 if thick else (3 if pattern else 1.5), dash=pattern and not thick)
    for tr in ax.traces:
        if tr.get("type", "scatter") != "scatter":
            continue
        mode = tr.get("mode") or "lines"
        colour = _colour(tr)
        dash = (tr.get("line") or {}).get("dash") in ("dash", "dot", "dashdot")
        points = [(ax.x(xv), ax.y(yv)) for xv, yv in zip(tr.get("x") or [], tr.get("y") or [])]
        points = [(x, y) for x, y in points if x is not None and y is not None]
        if (tr.get("line") or {}).get("shape") == "hv":
            stepped = []
            for (xa, ya), (xb, _) in zip(points, points[1:]):
                stepped += [(xa, ya), (xb, ya)]
            points = stepped + points[-1:]
        if "lines" in mode:
            scene.polyline(points, colour, 3.5, dash=dash)
        opacity = (tr.get("marker") or {}).get("opacity")
        if "markers" in mode and opacity != 0:
            symbol = (tr.get("marker") or {}).get("symbol", "")
            for x, y in points:
                if str(symbol).startswith("line-ew"):
                    scene.line(x - 16, y, x + 16, y, colour, 4)
                else:
                    scene.circle(x, y, 5.5, colour)


def _resolve(ref: str, value, axes: dict, box, horizontal: bool):
    """A coordinate of an annotation or shape in scene units: `ref` paper, 'x2 domain', 'x2', ..."""
    x0, y0, x1, y1 = box
    if ref in ("paper", "container", None):
        v = _num(value)
        if v is None:
            return None
        return x0 + v * (x1 - x0) if horizontal else y1 - v * (y1 - y0)
    name = ref.split()[0]
    ax = axes.get(name)
    if ax is None:
        return None
    if ref.endswith("domain"):
        v = _num(value)
        if v is None:
            return None
        bx0, by0, bx1, by1 = ax.box
        return bx0 + v * (bx1 - bx0) if horizontal else by1 - v * (by1 - by0)
    return ax.x(value) if horizontal else ax.y(value)


def figure_scene(fig: dict, title: str, caption: str, lang: str | None = None) -> Scene:
    """The chart `fig` (plotly figure data) drawn in the light theme under `title`, with `caption`."""
    scene, y = start(title)
    layout = fig.get("layout") or {}
    data = [tr for tr in (fig.get("data") or []) if tr.get("visible", True) is not False]
    subtitle = [line for line in plain(_title_text(layout.get("title")) and
                                       (layout.get("title") or {}).get("text", "")) if line.strip()]
    for line in subtitle:
        for part in wrap(line, BODY_SIZE, scene.width - 2 * PAD):
            y += BODY_SIZE * 1.3
            scene.text(PAD, y, part, BODY_SIZE, INK)
    if not data:  # an empty figure: its message is an annotation
        for note in layout.get("annotations") or []:
            for line in plain(note.get("text")):
                for part in wrap(line, BODY_SIZE, scene.width - 2 * PAD):
                    y += BODY_SIZE * 1.4
                    scene.text(PAD, y, part, BODY_SIZE, INK)
        return finish(scene, y + 10, caption)
    # legend: one swatch per named trace
    named = [tr for tr in data if tr.get("name") and tr.get("showlegend", True) is not False]
    x, y = PAD, y + 16
    for tr in named:
        name = " ".join(plain(tr["name"]))
        w = text_width(name, SMALL_SIZE) + 44
        if x > PAD and x + w > scene.width - PAD:
            x, y = PAD, y + SMALL_SIZE * 1.6
        colour = _colour(tr)
        if tr.get("type") == "bar":
            pattern = bool((tr.get("marker") or {}).get("pattern"))
            scene.rect(x, y, 26, 18, "#ffffff" if pattern else colour, colour, 3 if pattern else 1, dash=pattern)
        else:
            scene.line(x, y + 9, x + 26, y + 9, colour, 4, dash=(tr.get("line") or {}).get("dash") in ("dash", "dot"))
        scene.text(x + 34, y + 16, name, SMALL_SIZE, INK)
        x += w + 12
    y += 40
    # the subplots
    height = float(layout.get("height") or 300)
    margin = layout.get("margin") or {}
    plot_h = max(260.0, (height - float(margin.get("t", 80)) - float(margin.get("b", 40))) * 1.35)
    left = PAD + 70 + (24 if any(tr.get("orientation") == "h" for tr in data) else 0)
    if any(tr.get("orientation") == "h" for tr in data):
        left = PAD + 12 + max((text_width(str(v), TICK_SIZE) for tr in data for v in (tr.get("y") or [])), default=60)
    area = (left, y + 20, scene.width - PAD - 10, y + 20 + plot_h)
    pairs: dict[tuple[str, str], list[dict]] = {}
    for tr in data:
        pairs.setdefault((tr.get("xaxis", "x"), tr.get("yaxis", "y")), []).append(tr)
    axes_by_name: dict[str, _Axes] = {}
    barmode = layout.get("barmode", "group")
    for (xid, yid), traces in pairs.items():
        xd = (layout.get("xaxis" + xid[1:]) or {}).get("domain", [0, 1])
        yd = (layout.get("yaxis" + yid[1:]) or {}).get("domain", [0, 1])
        ax0, ay0, ax1, ay1 = area
        # room under each subplot for its tick labels and axis title
        box = (ax0 + xd[0] * (ax1 - ax0), ay0 + (1 - yd[1]) * (ay1 - ay0) + 26,
               ax0 + xd[1] * (ax1 - ax0), ay0 + (1 - yd[0]) * (ay1 - ay0) - 56)
        ax = _Axes(fig, xid, yid, traces, box)
        axes_by_name.setdefault(xid, ax)
        axes_by_name.setdefault(yid, ax)
        _draw_axes(scene, ax)
        _draw_traces(scene, ax, barmode)
    for shape in layout.get("shapes") or []:
        if shape.get("type") != "line":
            continue
        xa = _resolve(shape.get("xref", "x"), shape.get("x0"), axes_by_name, area, True)
        xb = _resolve(shape.get("xref", "x"), shape.get("x1"), axes_by_name, area, True)
        ya = _resolve(shape.get("yref", "y"), shape.get("y0"), axes_by_name, area, False)
        yb = _resolve(shape.get("yref", "y"), shape.get("y1"), axes_by_name, area, False)
        if None not in (xa, xb, ya, yb):
            line = shape.get("line") or {}
            scene.line(xa, ya, xb, yb, line.get("color", "#000000") if str(line.get("color", "")).startswith("#")
                       else "#000000", 2.5, dash=line.get("dash") in ("dash", "dot"))
    for note in layout.get("annotations") or []:
        xa = _resolve(note.get("xref", "x"), note.get("x"), axes_by_name, area, True)
        ya = _resolve(note.get("yref", "y"), note.get("y"), axes_by_name, area, False)
        if xa is None or ya is None:
            continue
        lines = [line for line in plain(note.get("text")) if line.strip()]
        anchor = {"left": "start", "right": "end"}.get(note.get("xanchor"), "middle")
        if note.get("showarrow"):
            ya -= 30
        if note.get("yanchor") == "bottom" or note.get("showarrow"):
            ya -= SMALL_SIZE * 1.25 * (len(lines) - 1)
        elif note.get("yanchor", "middle") == "middle":
            ya -= SMALL_SIZE * 1.25 * (len(lines) - 1) / 2
        if anchor == "middle" and lines:  # kept inside the figure
            half = max(text_width(line, SMALL_SIZE, bool(note.get("showarrow"))) for line in lines) / 2
            xa = min(max(xa, area[0] + half), scene.width - PAD - half)
        for i, line in enumerate(lines):
            scene.text(xa, ya + i * SMALL_SIZE * 1.25, line, SMALL_SIZE, INK, anchor=anchor,
                       bold=bool(note.get("showarrow")))
    return finish(scene, area[3] + 10, caption)
