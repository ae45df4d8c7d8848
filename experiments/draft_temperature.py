"""Which draft temperature maximizes acceptance when the target samples at a temperature: speculative sampling is
exact for ANY draft distribution q, as long as q is the distribution the draft token was actually drawn from
(Leviathan et al., arXiv:2211.17192, section 2.3), and a position is accepted with probability
sum_x min(p(x), q(x)). A draft drawn at the target's temperature is one choice of q; a cooler one (down to the
draft's argmax, where the acceptance is p(argmax q)) can overlap a peaked p more.

Runs the hybrid drafter with the automatic gamma at the target's temperature on the prompts, and at every
model-drafted position reads the draft's unwarped logits and the target's warped row p (both conditioned on the
same prefix), then reports the mean overlap each draft temperature would have had at those positions (first
draft positions and all positions). Offline: the draft actually sampled is unchanged.

    PYTHONPATH=. .venv/bin/python experiments/draft_temperature.py --temperature 0.7
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/classroom.jsonl")
    ap.add_argument("--draft", default="hybrid:feature")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--draft-temperatures", default="0,0.2,0.35,0.5,0.6,0.7,0.85,1.0")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gamma", default="auto", help="auto or a fixed gamma")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args(argv)
    import torch

    import decoding.drafters.feature as feature_mod
    import decoding.methods.speculative as spec_mod
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig, warp_logits
    from decoding.run.pair import load_pair

    torch.set_num_threads(1)
    draft_logits, target_rows = [], []

    def draft_warp(logits, sampling):
        draft_logits.append(logits.detach().float().clone())
        return warp_logits(logits, sampling)

    def target_warp(logits, sampling):
        rows = warp_logits(logits, sampling)
        target_rows.append(rows.detach().float().clone())
        return rows

    feature_mod.warp_logits = draft_warp
    spec_mod.warp_logits = target_warp
    temps = [float(t) for t in args.draft_temperatures.split(",")]
    sums = {t: collections.Counter() for t in temps}
    target, draft = load_pair("default", args.draft, dtype=args.dtype)
    sampling = SamplingConfig(args.temperature)
    schedule = "auto" if args.gamma == "auto" else "fixed"
    for r in range(args.repeats):
        for row in read_prompt_rows(args.prompts):
            ids = target.encode_prompt(row.prompt, True)
            config = RunConfig(method="speculative", max_new_tokens=args.max_new_tokens, sampling=sampling,
                               gamma=4 if schedule == "auto" else int(args.gamma), seed=r, stop_at_eos=False,
                               lean=True, extra={"gamma_schedule": schedule})
            for record in spec_mod.speculative(target, draft.drafter(target), ids, config):
                d_rows, p_rows = draft_logits[:], target_rows[-1]
                draft_logits.clear()
                target_rows.clear()
                if record.extra["chain"].get("source") != "model" or not d_rows:
                    continue
                for i, logits in enumerate(d_rows):
                    p = p_rows[i]
                    for t in temps:
                        if t == 0:
                            overlap = float(p[int(logits.argmax())])
                        else:
                            q = torch.softmax(logits / t, dim=-1)
                            overlap = float(torch.minimum(p, q).sum())
                        s = sums[t]
                        s["all"] += overlap
                        s["n_all"] += 1
                        if i == 0:
                            s["first"] += overlap
                            s["n_first"] += 1
    out = {"temperature": args.temperature, "positions": sums[temps[0]]["n_all"],
           "first_positions": sums[temps[0]]["n_first"],
           "overlap": {str(t): {"all": round(s["all"] / max(s["n_all"], 1), 4),
                                "first": round(s["first"] / max(s["n_first"], 1), 4)} for t, s in sums.items()}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
