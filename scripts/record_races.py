"""Record the app's shipped races: gallery prompts raced on the default set-up, one file each.

    .venv/bin/python scripts/record_races.py GALLERY_ID [GALLERY_ID ...] [--out assets/races]
        [--max-new-tokens 64] [--temperature 0] [--seed 0] [--threads N] [--lane-b autoregressive]
        [--drafter pair|tag|prompt-lookup|hybrid] [--gamma N] [--target default] [--draft SPEC] [--dtype auto]
        [--tags assets/gallery.json | --no-tags] [--keep-anyway]

    e.g. .venv/bin/python scripts/record_races.py gallery-summarize-1 gallery-rag-1 gallery-writing-3

Record on a QUIET machine (nothing else running: a race is two timings, and a busy CPU slows
whichever lane it hits). The default set-up is the app's: the default model pair (the embedded
target drafted by the hybrid of prompt lookup and the feature draft, the app's first preset) in the
default precision, greedy. Lane A is speculative decoding with the pair's own drafter at gamma 4
(the race tab's defaults), so that shipped races differ only in their prompt; lane B is
autoregressive decoding. Both are warmed up, then run one after the other with lean traces, exactly
as the app's Race button does (`app/race_run.py`).

Each lane's text is checked first (`app/race/text.py`: no loop, no echo of the prompt where the
task asks for new words); a race that fails is not written unless --keep-anyway. A race is written
to OUT/GALLERY_ID.json, which the race tab lists under "Shipped races", and its measurement becomes
the prompt's tag in assets/gallery.json (drafter, gamma, precision, speedup, tokens per target
call, machine, date), which the task gallery shows, so the gallery and the shipped race agree.
This script starts no server: it loads the models and decodes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.gallery import (DEFAULT_DRAFTER, DEFAULT_GAMMA, DRAFTERS, GALLERY_TAGS, gallery_item,
                         lane_a_choice)
from app.race_file import SHIPPED_RACES, Race, write_race
from app.race.text import text_problems


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("ids", nargs="+", metavar="GALLERY_ID", help="ids from benchmarks/gallery.jsonl")
    p.add_argument("--out", default=str(SHIPPED_RACES), help="folder of the race files (default: assets/races)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy: both lanes give the same text")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--lane-b", default="autoregressive", help="lane B's method (the baseline)")
    p.add_argument("--drafter", default=DEFAULT_DRAFTER, choices=("tag", *DRAFTERS),
                   help="lane A's drafter (default: the pair's own; 'tag' = as in the prompt's gallery tag)")
    p.add_argument("--gamma", type=int, default=None,
                   help=f"lane A's gamma (default: {DEFAULT_GAMMA}; with --drafter tag, the tag's)")
    p.add_argument("--target", default="default", help="target spec (default: the embedded default target)")
    p.add_argument("--draft", default=None,
                   help="the pair's draft spec (default: the app's for the target: the hybrid with the feature draft)")
    p.add_argument("--dtype", default="auto", help="precision of the models: auto (the device's default) or a dtype")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--warmup-tokens", type=int, default=4)
    p.add_argument("--tags", default=str(GALLERY_TAGS), help="the gallery's tags file to update (default: %(default)s)")
    p.add_argument("--no-tags", action="store_true", help="do not update the gallery's tags")
    p.add_argument("--keep-anyway", action="store_true", help="write a race whose text loops or echoes the prompt")
    return p.parse_args(argv)


def lane_problems(race: Race, kind: str) -> list[str]:
    """Each lane's text problems (`race_text.text_problems`), named by lane."""
    return [f"lane {lane.label}: {problem}" for lane in race.lanes
            for problem in text_problems(lane.summary.text, lane.summary.prompt, kind)]


def race_tag(race: Race) -> dict:
    """The gallery tag of a recorded race: what lane A measured against lane B."""
    from decoding.trace.metrics import RunCounts

    from app.race_result import speedup

    a, b = race.lanes[0], race.lanes[1]
    settings = a.summary.settings or {}
    draft = str((a.summary.models or {}).get("draft") or a.settings.get("draft") or "")
    drafter = "hybrid" if draft.startswith("hybrid") else draft
    machine = race.recorded.get("machine") or {}
    return {"id": race.gallery_id, "variant": f"speculative-{drafter}-g{settings.get('gamma')}", "drafter": drafter,
            "gamma": settings.get("gamma"), "precision": (a.summary.models or {}).get("dtype") or "",
            "speedup": speedup(a.summary, b.summary),
            "tokens_per_call": RunCounts.from_records(a.records).tokens_per_call,
            "machine": machine.get("cpu", "") if isinstance(machine, dict) else str(machine),
            "date": str(race.recorded.get("date") or "").replace("T", " ")[:16], "source": "recorded race"}


def update_tags(path: Path, tag: dict) -> None:
    """Replace (or add) the tag of `tag["id"]` in the gallery's tags file (a JSON list)."""
    import json

    entries = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    entries = [e for e in entries if not (isinstance(e, dict) and e.get("id") == tag["id"])]
    entries.append(tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from decoding.eval.bench.driver import machine_info
    from decoding.errors import ModelLoadError
    from decoding.methods.registry import METHODS
    from decoding.lm.models import DEFAULT_TARGET
    from decoding.run.pair import default_drafter_spec, load_pair

    from app.race.handlers import drafter_spec
    from app.race_result import race_figures
    from app.race_run import LaneRun, record_race
    from app.settings import make_settings

    if args.threads:
        torch.set_num_threads(args.threads)
    target_spec = DEFAULT_TARGET if args.target == "default" else args.target
    pair_draft = args.draft or default_drafter_spec(target_spec)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    for item_id in args.ids:
        item = gallery_item(item_id)
        if item is None:
            print(f"error: no gallery prompt with id {item_id!r} in benchmarks/gallery.jsonl", file=sys.stderr)
            return 2
        choice, gamma, _ = lane_a_choice(item.id)
        if args.drafter != "tag":
            choice, gamma = args.drafter, DEFAULT_GAMMA
        gamma = args.gamma or gamma
        runs = []
        try:
            for label, method in (("A", "speculative"), ("B", args.lane_b)):
                uses = METHODS[method].uses_drafter if method in METHODS else False
                draft = drafter_spec(choice, pair_draft) if label == "A" and uses else pair_draft
                s = make_settings(item.prompt, not args.no_chat, method, gamma,
                                  args.temperature, 0, 1.0, 1.0, args.seed, args.max_new_tokens, target_spec, draft,
                                  dtype=args.dtype)
                target, loaded = load_pair(s.target, s.draft, need_draft=uses, cached=True,
                                           dtype=None if s.dtype == "auto" else s.dtype)
                runs.append(LaneRun(label, s, target, loaded))
            info = machine_info()
            race = record_race(runs, warmup_tokens=args.warmup_tokens, title=f"{item.kind}: {item.title}",
                               gallery_id=item.id, recorded={"machine": info, "script": "scripts/record_races.py"})
        except (ValueError, ModelLoadError) as exc:
            print(f"error: {item_id}: {exc}", file=sys.stderr)
            return 2
        problems = lane_problems(race, item.kind)
        for problem in problems:
            print(f"{item_id}: {problem}", file=sys.stderr)
        for lane in race.lanes:
            print(f"{item_id} lane {lane.label}: {lane.summary.text!r}")
        if problems and not args.keep_anyway:
            print(f"error: {item_id}: not written (--keep-anyway writes it)", file=sys.stderr)
            status = 1
            continue
        path = out / f"{item.id}.json"
        write_race(path, race)
        if not args.no_tags:
            update_tags(Path(args.tags), race_tag(race))
        print(f"{path}: {race_figures(race)['result']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
