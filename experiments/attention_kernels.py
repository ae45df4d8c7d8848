"""Which attention kernel each target pass should run: SDPA, eager, or the split kernel that picks per pass.

Times the offline default target's passes over 1, 5, 9 and 17 new tokens on caches of several
lengths, and a prefill of each length, with transformers' "sdpa" and "eager" attention and with
the project's split kernel (`decoding/lm/models/attention.py`), in each precision asked for. Each
figure is the median of the repeats; the kernels alternate within a repeat, so machine noise
falls on all of them alike. `decoding.lm.models.attention` rests on these figures.

    .venv/bin/python experiments/attention_kernels.py [--threads 1] [--dtypes bfloat16,float32] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONTEXTS = (60, 300, 1000)
PASSES = (1, 5, 9, 17)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in ("bfloat16", "float16", "float32")]
    if args.threads < 1 or args.repeats < 1 or bad or not dtypes:
        print("error: --threads and --repeats must be >= 1; --dtypes takes bfloat16, float16, float32"
              + (f" (got {', '.join(bad)})" if bad else ""), file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.driver import machine_info
    from decoding.lm.cached_lm import CachedLM
    from decoding.lm.models.attention import NAME
    from decoding.run.pair import load_pair

    torch.set_num_threads(args.threads)
    kernels = ("sdpa", "eager", NAME)
    rows = []
    for dtype in dtypes:
        target, _ = load_pair("default", need_draft=False, dtype=dtype)
        model = target.model
        loaded_with = model.config._attn_implementation
        for context in CONTEXTS:
            tokens = [100 + (i * 7919) % 40000 for i in range(context + max(PASSES))]
            times = {(k, size): [] for k in kernels for size in (0, *PASSES)}  # size 0: the prefill
            for _ in range(args.repeats):
                for kernel in kernels:
                    model.set_attn_implementation(kernel)
                    lm = CachedLM(model, target.device, target.vocab_size)
                    start = time.perf_counter()
                    lm.forward(tokens[:context], keep=1)
                    times[(kernel, 0)].append(time.perf_counter() - start)
                    for size in PASSES:
                        start = time.perf_counter()
                        lm.forward(tokens[context:context + size])
                        times[(kernel, size)].append(time.perf_counter() - start)
                        lm.rollback(context)
            for size in (0, *PASSES):
                row = {"dtype": dtype, "context": context, "new_tokens": size or context,
                       "pass": "prefill" if size == 0 else "on the cache"}
                row.update({k: round(statistics.median(times[(k, size)]) * 1000, 2) for k in kernels})
                rows.append(row)
        model.set_attn_implementation(loaded_with)
        print(f"{dtype}: the loader gives this model '{loaded_with}'")
    print(f"\npass times in ms, {args.threads} thread(s), median of {args.repeats}:")
    print(f"| dtype | cached tokens | pass | sdpa | eager | {NAME} |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        cached = 0 if r["pass"] == "prefill" else r["context"]
        label = f"prefill of {r['new_tokens']}" if r["pass"] == "prefill" else f"{r['new_tokens']} new"
        print(f"| {r['dtype']} | {cached} | {label} | {r['sdpa']} | {r['eager']} | {r[NAME]} |")
    if args.out is not None:
        info = machine_info()
        machine = {"cpu": info["cpu"], "cpu_capability": info["cpu_capability"], "threads": args.threads,
                   "torch": torch.__version__}
        args.out.write_text(json.dumps({"machine": machine, "repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
