"""Links that reproduce what a page shows, as URL query parameters (no Gradio here).

- `?run=TOKEN`   a live run of the Explainer: its settings and seed (prompt, chat template, method, γ,
                 lenience, temperature, top-k, top-p, max new tokens, the method's own settings such as
                 beams or τ), its pair (target and draft), the precision it ran in and the device kind
                 it ran on. Opening the link fills in the controls and runs it again: with greedy
                 decoding or the same seed, on the same device kind and precision, the same tokens.
- `?trace=NAME`  a shipped example trace (the lesson's teacher links): replays the same records.
- `?race=TOKEN`  a race: its prompt, lanes, lane A's drafter and γ and the shared settings; or a
                 shipped race by its title.

TOKEN is compact: JSON, zlib-compressed, base64url without padding, behind a version letter ("1"),
so a long prompt still fits; a link longer than `MAX_LINK_CHARS` is refused with a message rather
than made (some browsers, chat apps and servers cut longer URLs). `?lang=` and `?projector=` stay
their own parameters beside these (the page's JavaScript keeps them when it builds the link), so a
link survives a language switch.

A bad link raises `LinkError` naming its reason as a catalog key (`export.link.why.*`) and its
parameters; the page shows the message and changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass

VERSION = "1"
MAX_LINK_CHARS = 2000  # the whole link, origin and path included (estimated with `ORIGIN_ALLOWANCE`)
ORIGIN_ALLOWANCE = 120  # what the page's address adds before the query (e.g. https://owner-space.hf.space/)


class LinkError(ValueError):
    """A link that cannot be opened: `why` is the catalog key of the reason, `params` its placeholders."""

    def __init__(self, why: str, **params):
        super().__init__(why)
        self.why = why
        self.params = params


def encode(data: dict) -> str:
    """`data` as a compact token: version letter + base64url(zlib(JSON)), no padding."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return VERSION + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")


def decode(token: str | None) -> dict:
    """The data of a token made by `encode`; LinkError for anything else (cut, garbled, another version)."""
    token = (token or "").strip()
    if not token:
        raise LinkError("export.link.why.garbled")
    if token[0] != VERSION:
        raise LinkError("export.link.why.version" if token[0].isdigit() else "export.link.why.garbled")
    body = token[1:]
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, zlib.error, UnicodeDecodeError):
        raise LinkError("export.link.why.garbled") from None
    if not isinstance(data, dict):
        raise LinkError("export.link.why.garbled")
    return data


def check_length(query: str) -> None:
    """LinkError("export.link.too_long") when a link with this query would exceed MAX_LINK_CHARS."""
    n = len(query) + ORIGIN_ALLOWANCE
    if n > MAX_LINK_CHARS:
        raise LinkError("export.link.too_long", n=n, limit=MAX_LINK_CHARS)


# --------------------------------------------------------------------------- a live run
RUN_FIELDS = {  # short key -> Settings field
    "p": "prompt", "c": "chat", "m": "method", "g": "gamma", "t": "temperature", "k": "top_k", "tp": "top_p",
    "l": "lenience", "s": "seed", "n": "max_new_tokens", "T": "target", "D": "draft", "x": "extra", "d": "dtype",
}


@dataclass
class RunLink:
    """What a run link carries: the run's settings (as `settings.Settings` fields), the precision it ran
    in (a dtype name) and the kind of device it ran on ("cpu", "cuda", "mps")."""

    settings: dict
    precision: str | None
    device: str | None


def run_query(settings, precision: str | None, device: str | None) -> str:
    """The query of a link that reruns a run (`?run=...`); LinkError when it would be too long."""
    data = {short: getattr(settings, name) for short, name in RUN_FIELDS.items()}
    data["P"], data["V"] = precision, device
    query = "?run=" + encode(data)
    check_length(query)
    return query


def read_run(token: str | None) -> RunLink:
    """A run link's content; LinkError when it is garbled or lacks a setting."""
    data = decode(token)
    try:
        settings = {name: data[short] for short, name in RUN_FIELDS.items()}
    except KeyError:
        raise LinkError("export.link.why.garbled") from None
    if not isinstance(settings["prompt"], str) or not isinstance(settings["extra"], dict) \
            or not isinstance(settings["target"], str) or not isinstance(settings["draft"], str):
        raise LinkError("export.link.why.garbled")
    precision, device = data.get("P"), data.get("V")
    return RunLink(settings, precision if isinstance(precision, str) else None,
                   device if isinstance(device, str) else None)


def device_kind(device) -> str | None:
    """"cuda" for cuda:0, "cpu" for cpu: the kind of a torch device (or its name)."""
    return None if device is None else str(device).split(":")[0]


# --------------------------------------------------------------------------- a race
RACE_FIELDS = ("prompt", "lane_a", "lane_b", "lane_a_draft", "lane_a_gamma")


def race_query(race: dict) -> str:
    """The query of a race link: `race` holds RACE_FIELDS and the shared settings (`shared`: the
    Explainer's pair, seed, sampling, max new tokens, chat template, precision), or `shipped`: a
    shipped race's title. LinkError when too long."""
    query = "?race=" + encode(race)
    check_length(query)
    return query


def read_race(token: str | None) -> dict:
    """A race link's content: {"shipped": title} or the RACE_FIELDS and "shared"; LinkError otherwise."""
    data = decode(token)
    if isinstance(data.get("shipped"), str):
        return {"shipped": data["shipped"]}
    if not all(name in data for name in RACE_FIELDS) or not isinstance(data.get("shared"), dict) \
            or not isinstance(data["prompt"], str):
        raise LinkError("export.link.why.garbled")
    return data
