"""The task gallery shared by the race and the explainer: prompts by kind, and what the benchmark
measured for each.

The prompts come from `benchmarks/gallery.jsonl` (fields id, kind, title, prompt). The measured
tags come ONLY from `assets/gallery.json`, which the benchmark writes (per prompt id: drafter,
gamma, precision, speedup, tokens_per_call, machine, date); nothing here types a tag by hand. That
file may be absent: then the prompts show without tags and a race's lane A is speculative decoding
with the model pair's own draft at gamma 4. No Gradio here.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from decoding.paths import BENCHMARKS, GALLERY_TAGS

from .i18n import t

GALLERY_PROMPTS = BENCHMARKS / "gallery.jsonl"

# Lane A's drafter in the race: a choice relative to the model pair, so a tag measured on the
# default pair also reads on another pair (value -> label, in English; `drafter_label` in the page's language).
DRAFTERS = {
    "pair": "the model pair's draft",
    "prompt-lookup": "prompt lookup (copies from the context, no model)",
    "hybrid": "hybrid: lookup where the text repeats, the pair's draft elsewhere",
}


def drafter_label(key: str) -> str:
    """Lane A's drafter choice in words, in the current language (`i18n.current`)."""
    return t(f"race.drafter.{key}")


def drafter_choices() -> list[tuple[str, str]]:
    return [(drafter_label(key), key) for key in DRAFTERS]
DEFAULT_DRAFTER, DEFAULT_GAMMA = "pair", 4


@dataclass(frozen=True)
class GalleryItem:
    id: str
    kind: str
    title: str
    prompt: str


@dataclass(frozen=True)
class GalleryTag:
    """What the benchmark measured for one gallery prompt (assets/gallery.json)."""

    id: str
    drafter: str
    gamma: int | str  # a whole number, or a schedule's name ("auto") as the benchmark wrote it
    precision: str = ""
    speedup: float | None = None
    tokens_per_call: float | None = None
    machine: str = ""
    date: str = ""

    @property
    def drafter_choice(self) -> str:
        """The race's drafter choice (a key of DRAFTERS) this tag's drafter stands for."""
        name = self.drafter.strip().lower()
        if "lookup" in name and not name.startswith("hybrid"):
            return "prompt-lookup"
        if name.startswith("hybrid"):
            return "hybrid"
        return "pair"  # the distilled draft / a draft model: the pair's own draft


def gallery_items(path: Path | None = None) -> list[GalleryItem]:
    """The gallery prompts in file order ([] when the file is absent)."""
    path = GALLERY_PROMPTS if path is None else Path(path)
    if not path.is_file():
        return []
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        data = json.loads(line)
        try:
            items.append(GalleryItem(str(data["id"]), str(data["kind"]), str(data["title"]), str(data["prompt"])))
        except KeyError as exc:
            raise ValueError(f"{path.name} line {number} lacks the field {exc}") from None
    return items


def _machine(value) -> str:
    if isinstance(value, dict):
        return str(value.get("cpu") or value.get("cuda") or value.get("platform") or "")
    return "" if value is None else str(value)


def _tag(data: dict, key: str | None = None) -> GalleryTag | None:
    ident = data.get("id", key)
    if not ident or not data.get("drafter"):
        return None
    try:
        gamma = data.get("gamma", DEFAULT_GAMMA)
        gamma = int(gamma) if isinstance(gamma, (int, float)) or str(gamma).isdigit() else str(gamma)
        speedup = None if data.get("speedup") is None else float(data["speedup"])
        tpc = None if data.get("tokens_per_call") is None else float(data["tokens_per_call"])
    except (TypeError, ValueError):
        return None
    return GalleryTag(str(ident), str(data["drafter"]), gamma, str(data.get("precision") or ""), speedup, tpc,
                      _machine(data.get("machine")), str(data.get("date") or ""))


def gallery_tags(path: Path | None = None) -> dict[str, GalleryTag]:
    """Measured tags by prompt id; {} when the benchmark has not written the file yet. Accepts a list
    of entries, {"prompts": [...]} or {id: entry}; an unreadable file is ignored with a warning."""
    path = GALLERY_TAGS if path is None else Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        warnings.warn(f"{path.name} is not readable JSON ({exc}); the gallery shows no measured tags")
        return {}
    if isinstance(data, dict):
        listed = next((data[k] for k in ("prompts", "gallery", "items", "results") if isinstance(data.get(k), list)),
                      None)
        entries = listed if listed is not None else [
            (v, k) for k, v in data.items() if isinstance(v, dict)]
    else:
        entries = data if isinstance(data, list) else []
    tags = {}
    for entry in entries:
        value, key = entry if isinstance(entry, tuple) else (entry, None)
        tag = _tag(value, key) if isinstance(value, dict) else None
        if tag is not None:
            tags[tag.id] = tag
    return tags


def tag_text(tag: GalleryTag | None) -> str:
    """A tag in words (Markdown), or why there is none."""
    if tag is None:
        return t("race.tag.none", gamma=DEFAULT_GAMMA)
    parts = [t("race.tag.drafter", drafter=tag.drafter, gamma=tag.gamma)]
    if tag.speedup is not None:
        parts.append(t("race.tag.speedup", speedup=f"{tag.speedup:.2f}")
                     + (t("race.tag.slower") if tag.speedup < 1 else ""))
    if tag.tokens_per_call is not None:
        parts.append(t("race.tag.tpc", tpc=f"{tag.tokens_per_call:.2f}"))
    where = ", ".join(x for x in (tag.precision, tag.machine, tag.date) if x)
    return t("race.tag.measured", parts=", ".join(parts)) + (f" ({where})." if where else ".")


def gallery_choices(items: list[GalleryItem] | None = None,
                    tags: dict[str, GalleryTag] | None = None) -> list[tuple[str, str]]:
    """(label, id) pairs for a dropdown: kind, title and, where measured, the speedup."""
    items = gallery_items() if items is None else items
    tags = gallery_tags() if tags is None else tags
    out = []
    for item in items:
        label = f"{item.kind}: {item.title}"
        tag = tags.get(item.id)
        if tag is not None and tag.speedup is not None:
            label += t("race.gallery.measured", speedup=f"{tag.speedup:.2f}", drafter=tag.drafter, gamma=tag.gamma)
        out.append((label, item.id))
    return out


def gallery_item(item_id: str, items: list[GalleryItem] | None = None) -> GalleryItem | None:
    return next((i for i in (gallery_items() if items is None else items) if i.id == item_id), None)


def lane_a_choice(item_id: str, tags: dict[str, GalleryTag] | None = None) -> tuple[str, int, GalleryTag | None]:
    """Lane A's (drafter choice, gamma) for a gallery prompt: its measured tag, else the defaults."""
    tag = (gallery_tags() if tags is None else tags).get(item_id)
    if tag is None:
        return DEFAULT_DRAFTER, DEFAULT_GAMMA, None
    return tag.drafter_choice, tag.gamma if isinstance(tag.gamma, int) else DEFAULT_GAMMA, tag
