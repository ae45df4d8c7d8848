"""Benchmark: the app's rendering overhead. Decodes the same run headless (the engine's generator,
as the CLI does) and through the app's /generate endpoint with pacing off (gradio_client), and
prints both wall times. Quality bar: the app costs at most 15% of headless tokens/s.

    .venv/bin/python experiments/bench_app_overhead.py [--max-new-tokens 64] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt", default="Repeat this list exactly, then continue it: apple, banana, cherry, apple, banana, cherry,")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

    from gradio_client import Client

    from app.layout import build_demo, launch_kwargs
    from decoding.lm.models import load_draft, load_model_cached
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    from app.session import _presets

    pair = _presets()[0]  # the app's default pair: run the very same pair headless
    target = load_model_cached(pair.target)
    draft = pair.draft if pair.draft == "prompt-lookup" else load_draft(pair.draft, target.device, cached=True)
    config = RunConfig(method="speculative", max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(0.7),
                       gamma=4, seed=0, chat=True, stop_at_eos=True)
    ids = target.encode_prompt(args.prompt, True)

    demo = build_demo()
    demo.launch(server_name="127.0.0.1", server_port=0 or None, prevent_thread_lock=True, quiet=True, **launch_kwargs())
    client = Client(demo.local_url, verbose=False)
    kwargs = dict(prompt=args.prompt, chat=True, method="speculative", gamma=4, temperature=0.7, seed=0,
                  max_new_tokens=args.max_new_tokens, pacing=0, api_name="/generate")
    client.predict(**kwargs)  # warm-up (loads the model in the app)
    for r in range(args.repeats):
        t0 = time.perf_counter()
        records = list(decode(target, draft, ids, config))
        headless = time.perf_counter() - t0
        n = sum(len(x.emitted) for x in records)
        t0 = time.perf_counter()
        client.predict(**kwargs)
        app = time.perf_counter() - t0
        print(f"run {r}: {n} tokens; headless {headless:.2f} s ({n / headless:.1f} tok/s), "
              f"app via gradio_client {app:.2f} s ({n / app:.1f} tok/s): overhead {100 * (app / headless - 1):.0f}%")
    demo.close()


if __name__ == "__main__":
    main()
