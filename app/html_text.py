"""Token text as safe HTML and short number formats, shared by every renderer.

Every piece of token text goes through `token_html` (visible whitespace, then HTML escaping) and
every attribute through `attr`: token text can hold `<`, `&`, quotes, newlines and spaces.

Special tokens of a chat template or a tokenizer ("<|im_start|>", "<|im_end|>", "<|endoftext|>",
"<file_sep>") are not text a student could read: they show as a labelled marker, e.g.
"⟨end of turn⟩" (`special_name`), in chips, tables, trees and chart labels alike.
"""

from __future__ import annotations

import html
import re

# Special tokens with a name a student understands; any other "<|...|>" or "<word_word>" token shows
# as "⟨special: word⟩".
SPECIAL_NAMES = {
    "<|im_start|>": "start of a chat turn",
    "<|im_end|>": "end of turn",
    "<|endoftext|>": "end of text",
    "<|end_of_text|>": "end of text",
    "<|begin_of_text|>": "start of text",
    "<|eot_id|>": "end of turn",
    "<|start_header_id|>": "start of a role name",
    "<|end_header_id|>": "end of a role name",
    "<s>": "start of text",
    "</s>": "end of text",
    "<filename>": "special: filename",
}
_SPECIAL = re.compile(r"^<\|[^<>|\s]{1,40}\|>$|^<[a-z]+(?:_[a-z]+)+>$")


def special_name(text: str) -> str | None:
    """The name of a special token ("end of turn"), None for ordinary text."""
    if text in SPECIAL_NAMES:
        return SPECIAL_NAMES[text]
    if _SPECIAL.match(text):
        return "special: " + text.strip("<|>").replace("_", " ")
    return None


def attr(text: str) -> str:
    return html.escape(text, quote=True)


def token_html(text: str) -> str:
    """Escaped token text with spaces shown as a faint middle dot, newlines as a return arrow
    and tabs as an arrow; the empty token as an empty-set sign; a special token as its marker."""
    if text == "":
        return '<span class="ws">∅</span>'
    name = special_name(text)
    if name is not None:
        return f'<span class="special">⟨{html.escape(name)}⟩</span>'
    out = []
    for ch in text:
        if ch == " ":
            out.append('<span class="ws">·</span>')
        elif ch == "\n":
            out.append('<span class="ws">↵</span>')
        elif ch == "\t":
            out.append('<span class="ws">⇥</span>')
        elif ch == "\r":
            out.append('<span class="ws">␍</span>')
        else:
            out.append(html.escape(ch, quote=True))
    return "".join(out)


def visible(text: str) -> str:
    """Plain-text form of a token for labels and tooltips (no HTML): spaces as ·, newlines as ↵."""
    if text == "":
        return "∅"
    name = special_name(text)
    if name is not None:
        return f"⟨{name}⟩"
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x != 0 and abs(x) < 10 ** -digits:
        return f"{x:.1e}"
    return f"{x:.{digits}f}"


def num(x, digits: int = 3) -> str:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "—"
    if f != f:
        return "—"
    if f in (float("inf"), float("-inf")):
        return "∞" if f > 0 else "−∞"
    return fmt(f, digits)


def coin_bar(coin: float | None, threshold: float | None, accepted: bool | None, lang: str | None = None) -> str:
    """The coin u against its threshold as a bar: the grey part is the threshold, the tick the coin."""
    from .i18n import t as tr

    if coin is None or threshold is None:
        return ""
    t = max(0.0, min(1.0, threshold)) * 100
    u = max(0.0, min(1.0, coin)) * 100
    state = "acc" if accepted else "rej"
    aria = attr(tr("explainer.draft.coin_aria", lang, coin=fmt(coin), threshold=fmt(threshold)))
    return (
        f'<div class="coinbar {state}" role="img" aria-label="{aria}">'
        f'<div class="thr" style="width:{t:.1f}%"></div><div class="u" style="left:{u:.1f}%"></div></div>'
    )
