"""Issue 5's comparison table: autoregressive, speculative, mentored (two D), MJSD on one prompt set.

    .venv/bin/python experiments/compare_methods.py --prompts benchmarks/dev.jsonl [--limit N]

Every row uses the same warping (the MJSD paper's top-k 20, top-p 0.9 at temperature 1) and the same
seed per prompt. Columns (pooled over all prompts):
  mean accepted   accepted DRAFT tokens per iteration that had a draft (the +1 token not counted)
  tokens/call     emitted tokens per target forward pass (accepted + the correction/bonus token)
  tokens/s        emitted tokens / decoding wall time (prefill included, model loading not)
  speedup         tokens/s relative to the autoregressive row
  target ppl      exp(mean -log p_raw) of the emitted tokens under the RAW target (temperature 1,
                  no top-k/top-p: a warped p can be 0), read off the engine's verify logits

Draft: `--draft int8` (the default) is a dynamically int8-quantized copy of the target built in
this process (torch.ao quantize_dynamic on the transformer blocks' Linear layers, lm_head kept in
float): a stand-in while no trained draft ships. Any spec `load_model` accepts also works.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from decoding.lm.models import load_draft, load_model  # noqa: E402
from decoding.run.runner import decode  # noqa: E402
from decoding.methods.base import RunConfig  # noqa: E402
from decoding.rules.warp import SamplingConfig  # noqa: E402


def int8_draft(target):
    """A dynamically int8-quantized copy of the target (CPU only), sharing its tokenizer."""
    import torch.ao.quantization as quant

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = quant.quantize_dynamic(copy.deepcopy(target.model), {torch.nn.Linear}, dtype=torch.qint8)
    model.lm_head = target.model.lm_head  # keep the output layer float (and `vocab_size` readable)
    return dataclasses.replace(target, model=model, name=f"{target.name}-int8-dynamic", spec="int8")


def rows(args) -> list[tuple[str, str, dict]]:
    out = [("autoregressive", "autoregressive", {}), ("speculative", "speculative", {})]
    for d in args.kl_bounds:
        out.append((f"mentored D={d:g}", "mentored", {"kl_bound": d}))
    out.append((f"mjsd B={args.beams} tau={args.tau:g}", "mjsd", {"beams": args.beams, "tau": args.tau}))
    return out


def run_row(target, draft, prompts, method, extra, args) -> dict:
    tokens = iterations_with_draft = accepted = calls = 0
    wall = nll = 0.0
    for i, prompt in enumerate(prompts):
        config = RunConfig(method=method, max_new_tokens=args.max_new_tokens,
                           sampling=SamplingConfig(args.temperature, args.top_k, args.top_p),
                           gamma=args.gamma, seed=args.seed + i, chat=True, lean=True, extra=extra)
        ids = target.encode_prompt(prompt, True)
        records = list(decode(target, draft, ids, config))
        for r in records:
            tokens += len(r.emitted)
            nll -= sum(r.extra["target_logprobs"])
            if r.draft:
                iterations_with_draft += 1
                accepted += r.accepted_length
        calls += records[-1].target_calls
        wall += records[-1].elapsed
    return {
        "mean_accepted": accepted / iterations_with_draft if iterations_with_draft else None,
        "tokens_per_call": tokens / calls,
        "tokens_per_second": tokens / wall,
        "target_perplexity": math.exp(nll / tokens),
        "tokens": tokens,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default=str(ROOT.parent / "shared" / "prompts" / "dev.jsonl"))
    ap.add_argument("--limit", type=int, default=0, help="first N prompts only (0: all)")
    ap.add_argument("--target", default="default")
    ap.add_argument("--draft", default="int8", help="'int8' (quantized copy of the target) or a model spec")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--kl-bounds", type=float, nargs=2, default=[0.1, 0.5])
    ap.add_argument("--beams", type=int, default=8)
    ap.add_argument("--tau", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per row")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    prompts = [json.loads(line)["prompt"] for line in open(args.prompts) if line.strip()]
    if args.limit:
        prompts = prompts[: args.limit]
    target = load_model(args.target, device="cpu" if args.draft == "int8" else None)
    draft = int8_draft(target) if args.draft == "int8" else load_draft(args.draft, target.device)
    # warm-up (first-call allocations), not measured
    list(decode(target, draft, target.encode_prompt("Hi", True),
                RunConfig(method="speculative", max_new_tokens=4, lean=True)))

    results = []
    base = None
    for label, method, extra in rows(args):
        t0 = time.perf_counter()
        res = run_row(target, draft, prompts, method, extra, args)
        base = base or res["tokens_per_second"]
        res.update(label=label, speedup=res["tokens_per_second"] / base, seconds=time.perf_counter() - t0)
        results.append(res)
        print(f"done {label} in {res['seconds']:.0f} s", file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps(res))

    print(f"\ntarget {target.name}, draft {draft.name}, {len(prompts)} prompts of {Path(args.prompts).name}, "
          f"{args.max_new_tokens} new tokens max, chat template, temperature {args.temperature:g}, "
          f"top-k {args.top_k}, top-p {args.top_p:g}, gamma {args.gamma}, device {target.device}, "
          f"{torch.get_num_threads()} threads\n")
    print("| method | mean accepted (draft tokens) | tokens / target call | tokens/s | speedup | target perplexity |")
    print("|---|---|---|---|---|---|")
    for r in results:
        acc = "-" if r["mean_accepted"] is None else f"{r['mean_accepted']:.2f}"
        print(f"| {r['label']} | {acc} | {r['tokens_per_call']:.2f} | {r['tokens_per_second']:.2f} | "
              f"{r['speedup']:.2f}x | {r['target_perplexity']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
