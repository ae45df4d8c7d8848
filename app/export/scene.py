"""A figure as plain drawing data (rectangles, lines, text, polylines, circles) and its two writers:
standalone SVG text and a PNG drawn with Pillow.

Why not rasterize the SVG: a self-contained SVG rasterizer with wheels is not among the app's
packages (cairosvg needs the system's cairo, kaleido needs Chrome, neither is on a Space by default),
while Pillow comes with Gradio. The panels build one `Scene` and both writers draw the same items,
so the SVG and the PNG show the same figure. Coordinates are in scene units (the SVG's user units);
the PNG is drawn at `scale` pixels per unit, chosen so that it is at least `MIN_PNG_WIDTH` px wide.

Text widths for layout are measured with the PNG's font (`text_width`), so what fits in the PNG fits
in the SVG within the difference between the fonts the viewer has and DejaVu Sans.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from xml.sax.saxutils import escape, quoteattr

from PIL import Image, ImageDraw, ImageFont

MIN_PNG_WIDTH = 1600
FONT_FAMILY = "DejaVu Sans, Noto Sans, Noto Sans CJK SC, Arial, sans-serif"
# fonts tried in order for the PNG (by file name, found in the system's font folders by Pillow); the
# last resort is Pillow's own scalable default font
FONT_FILES = {False: ["DejaVuSans.ttf", "NotoSans-Regular.ttf", "NotoSansCJK-Regular.ttc", "Arial.ttf"],
              True: ["DejaVuSans-Bold.ttf", "NotoSans-Bold.ttf", "NotoSansCJK-Bold.ttc", "Arial Bold.ttf"]}
# text with Chinese, Japanese or Korean characters is drawn in a CJK font where the system has one (DejaVu
# has no CJK glyphs; Pillow does not fall back per glyph); without one such characters show as boxes in
# the PNG (the SVG names the CJK fonts, so a viewer that has one shows them)
CJK_FILES = {False: ["NotoSansCJK-Regular.ttc", "NotoSerifCJK-Regular.ttc", "wqy-zenhei.ttc", "wqy-microhei.ttc"],
             True: ["NotoSansCJK-Bold.ttc", "NotoSerifCJK-Bold.ttc", "wqy-zenhei.ttc", "wqy-microhei.ttc"]}
FONT_DIRS = ["/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/noto", "/usr/share/fonts/opentype/noto",
             "/usr/share/fonts/truetype/wqy", "/usr/share/fonts/opentype/noto-cjk"]
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def needs_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@lru_cache(maxsize=128)
def font(size: float, bold: bool = False, cjk: bool = False) -> ImageFont.FreeTypeFont:
    """A TrueType font at `size` pixels for the PNG and for measuring text (`cjk`: one with CJK glyphs,
    falling back to the Latin font where the system has none)."""
    px = max(1, round(size))
    for name in (CJK_FILES[bold] if cjk else []) + FONT_FILES[bold]:
        for candidate in [name, *(f"{d}/{name}" for d in FONT_DIRS)]:
            try:
                return ImageFont.truetype(candidate, px)
            except OSError:
                continue
    return ImageFont.load_default(size=px)


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The width of one line of `text` at `size` units (measured at 4x for precision)."""
    return font(size * 4, bold, needs_cjk(text)).getlength(text) / 4


@dataclass
class Scene:
    """A figure: `width` x `height` units on a `background`, and the items drawn in order."""

    width: float
    height: float
    background: str = "#ffffff"
    items: list[tuple] = field(default_factory=list)
    title: str = ""  # the SVG's <title>: what the figure is (screen readers, file browsers)

    def rect(self, x, y, w, h, fill="none", stroke=None, stroke_width=1.0, dash=False, radius=0.0) -> None:
        self.items.append(("rect", x, y, w, h, fill, stroke, stroke_width, dash, radius))

    def line(self, x1, y1, x2, y2, stroke="#000000", stroke_width=1.0, dash=False) -> None:
        self.items.append(("line", x1, y1, x2, y2, stroke, stroke_width, dash))

    def polyline(self, points, stroke="#000000", stroke_width=2.0, dash=False) -> None:
        points = [(x, y) for x, y in points if x is not None and y is not None]
        if len(points) > 1:
            self.items.append(("polyline", points, stroke, stroke_width, dash))

    def circle(self, cx, cy, r, fill="#000000", stroke=None) -> None:
        self.items.append(("circle", cx, cy, r, fill, stroke))

    def text(self, x, y, text, size=20.0, fill="#111111", anchor="start", bold=False, strike=False) -> None:
        """One line of text whose baseline is at `y`; `anchor`: start | middle | end."""
        if text:
            self.items.append(("text", x, y, str(text), size, fill, anchor, bold, strike))

    def texts(self) -> list[str]:
        """Every text drawn (tests)."""
        return [item[3] for item in self.items if item[0] == "text"]


def _dash(dash: bool, width: float) -> str:
    return f' stroke-dasharray="{3 * width:g} {2 * width:g}"' if dash else ""


def to_svg(scene: Scene) -> str:
    """The scene as a standalone SVG document (UTF-8 text, parses as XML)."""
    w, h = scene.width, scene.height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:g}" height="{h:g}" viewBox="0 0 {w:g} {h:g}" '
           f'font-family={quoteattr(FONT_FAMILY)}>']
    if scene.title:
        out.append(f"<title>{escape(scene.title)}</title>")
    out.append(f'<rect x="0" y="0" width="{w:g}" height="{h:g}" fill="{scene.background}"/>')
    for item in scene.items:
        kind = item[0]
        if kind == "rect":
            _, x, y, rw, rh, fill, stroke, sw, dash, radius = item
            line = f' stroke="{stroke}" stroke-width="{sw:g}"{_dash(dash, sw)}' if stroke else ""
            rx = f' rx="{radius:g}"' if radius else ""
            out.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(rw, 0):.2f}" height="{max(rh, 0):.2f}"{rx} '
                       f'fill="{fill}"{line}/>')
        elif kind == "line":
            _, x1, y1, x2, y2, stroke, sw, dash = item
            out.append(f'<line x1="{x1:.2f}" y1="{y1:.2f}" x2="{x2:.2f}" y2="{y2:.2f}" stroke="{stroke}" '
                       f'stroke-width="{sw:g}"{_dash(dash, sw)}/>')
        elif kind == "polyline":
            _, points, stroke, sw, dash = item
            pts = " ".join(f"{x:.2f},{y:.2f}" for x, y in points)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="{sw:g}"'
                       f'{_dash(dash, sw)} stroke-linejoin="round"/>')
        elif kind == "circle":
            _, cx, cy, r, fill, stroke = item
            line = f' stroke="{stroke}" stroke-width="1.5"' if stroke else ""
            out.append(f'<circle cx="{cx:.2f}" cy="{cy:.2f}" r="{r:g}" fill="{fill}"{line}/>')
        elif kind == "text":
            _, x, y, text, size, fill, anchor, bold, strike = item
            extra = (' font-weight="bold"' if bold else "") + (' text-decoration="line-through"' if strike else "")
            out.append(f'<text x="{x:.2f}" y="{y:.2f}" font-size="{size:g}" fill="{fill}" text-anchor="{anchor}"'
                       f'{extra} xml:space="preserve">{escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def png_scale(scene: Scene, min_width: int = MIN_PNG_WIDTH) -> float:
    """Pixels per scene unit: 2, or more where that is needed to reach `min_width` px."""
    return max(2.0, min_width / scene.width)


def _dashed(draw, x1, y1, x2, y2, fill, width) -> None:
    length = math.hypot(x2 - x1, y2 - y1)
    if length == 0:
        return
    step, on = 5 * width, 3 * width
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    t = 0.0
    while t < length:
        e = min(t + on, length)
        draw.line([(x1 + ux * t, y1 + uy * t), (x1 + ux * e, y1 + uy * e)], fill=fill, width=max(1, round(width)))
        t += step


def to_png(scene: Scene, min_width: int = MIN_PNG_WIDTH) -> bytes:
    """The scene drawn with Pillow at `png_scale` pixels per unit, as PNG bytes (>= `min_width` px wide)."""
    s = png_scale(scene, min_width)
    image = Image.new("RGB", (math.ceil(scene.width * s), math.ceil(scene.height * s)), scene.background)
    draw = ImageDraw.Draw(image)
    for item in scene.items:
        kind = item[0]
        if kind == "rect":
            _, x, y, w, h, fill, stroke, sw, dash, radius = item
            box = [x * s, y * s, (x + max(w, 0)) * s, (y + max(h, 0)) * s]
            if box[2] - box[0] < 0.5 or box[3] - box[1] < 0.5:
                continue
            fill_c = None if fill == "none" else fill
            if dash and stroke:
                if fill_c:
                    draw.rectangle(box, fill=fill_c)
                x1, y1, x2, y2 = box
                for a, b in [((x1, y1), (x2, y1)), ((x2, y1), (x2, y2)), ((x2, y2), (x1, y2)), ((x1, y2), (x1, y1))]:
                    _dashed(draw, *a, *b, stroke, sw * s)
            else:
                width = max(1, round(sw * s)) if stroke else 0
                draw.rounded_rectangle(box, radius=radius * s, fill=fill_c, outline=stroke, width=width)
        elif kind == "line":
            _, x1, y1, x2, y2, stroke, sw, dash = item
            if dash:
                _dashed(draw, x1 * s, y1 * s, x2 * s, y2 * s, stroke, sw * s)
            else:
                draw.line([(x1 * s, y1 * s), (x2 * s, y2 * s)], fill=stroke, width=max(1, round(sw * s)))
        elif kind == "polyline":
            _, points, stroke, sw, dash = item
            pts = [(x * s, y * s) for x, y in points]
            if dash:
                for a, b in zip(pts, pts[1:]):
                    _dashed(draw, *a, *b, stroke, sw * s)
            else:
                draw.line(pts, fill=stroke, width=max(1, round(sw * s)), joint="curve")
        elif kind == "circle":
            _, cx, cy, r, fill, stroke = item
            draw.ellipse([(cx - r) * s, (cy - r) * s, (cx + r) * s, (cy + r) * s], fill=fill, outline=stroke,
                         width=max(1, round(1.5 * s)) if stroke else 0)
        elif kind == "text":
            _, x, y, text, size, fill, anchor, bold, strike = item
            f = font(size * s, bold, needs_cjk(text))
            where = {"start": "ls", "middle": "ms", "end": "rs"}[anchor]  # on the baseline, as SVG's text
            draw.text((x * s, y * s), text, fill=fill, font=f, anchor=where)
            if strike:
                w = f.getlength(text)
                left = x * s - {"start": 0, "middle": w / 2, "end": w}[anchor]
                mid = y * s - size * s * 0.32
                draw.line([(left, mid), (left + w, mid)], fill=fill, width=max(1, round(size * s / 12)))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) read off a PNG's IHDR header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
