"""Record the app's shipped races: gallery prompts raced on the default set-up, one file each.

    .venv/bin/python scripts/record_races.py GALLERY_ID [GALLERY_ID ...] [--out assets/races]
        [--max-new-tokens 64] [--temperature 0] [--seed 0] [--threads N] [--lane-b autoregressive]
        [--drafter tag|pair|prompt-lookup|hybrid] [--gamma N] [--target default] [--draft SPEC] [--dtype auto]

    e.g. .venv/bin/python scripts/record_races.py gallery-summarize-1 gallery-code-1 gallery-writing-1

Record on a QUIET machine (nothing else running: a race is two timings, and a busy CPU slows
whichever lane it hits). The default set-up is the default model pair (the embedded target and its
distilled draft) in the default precision, greedy. Lane A is speculative decoding with the drafter
and gamma measured for that prompt in docs/bench/gallery.json (the benchmark writes it; without a
tag: the pair's draft, gamma 4); lane B is autoregressive decoding. Both are warmed up, then run one
after the other with lean traces, exactly as the app's Race button does (`app/race_run.py`). Each
race is written to OUT/GALLERY_ID.json, which the race tab lists under "Shipped races". This script
starts no server: it loads the models and decodes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.gallery import DRAFTERS, gallery_item, lane_a_choice  # noqa: E402
from app.race_file import SHIPPED_RACES, write_race  # noqa: E402


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
    p.add_argument("--drafter", default="tag", choices=("tag", *DRAFTERS),
                   help="lane A's drafter: 'tag' = as measured for the prompt (else the pair's draft)")
    p.add_argument("--gamma", type=int, default=None, help="lane A's gamma (default: the prompt's tag, else 4)")
    p.add_argument("--target", default="default", help="target spec (default: the embedded default target)")
    p.add_argument("--draft", default=None, help="the pair's draft spec (default: the target's default draft)")
    p.add_argument("--dtype", default="auto", help="precision of the models: auto (the device's default) or a dtype")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--warmup-tokens", type=int, default=4)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from decoding.bench.driver import machine_info
    from decoding.errors import ModelLoadError
    from decoding.methods import METHODS
    from decoding.models import DEFAULT_TARGET
    from decoding.pair import default_draft_spec, load_pair

    from app.race import drafter_spec
    from app.race_result import race_figures
    from app.race_run import LaneRun, record_race
    from app.settings import make_settings

    if args.threads:
        torch.set_num_threads(args.threads)
    target_spec = DEFAULT_TARGET if args.target == "default" else args.target
    pair_draft = args.draft or default_draft_spec(target_spec)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for item_id in args.ids:
        item = gallery_item(item_id)
        if item is None:
            print(f"error: no gallery prompt with id {item_id!r} in benchmarks/gallery.jsonl", file=sys.stderr)
            return 2
        choice, gamma, _ = lane_a_choice(item.id)
        choice = choice if args.drafter == "tag" else args.drafter
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
        path = out / f"{item.id}.json"
        write_race(path, race)
        print(f"{path}: {race_figures(race)['result']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
