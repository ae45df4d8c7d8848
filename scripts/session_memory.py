"""Bytes an idle visitor costs the app: the app's own Session and Gradio's state for that session.

Builds the app in this process (the default pair unless SPECDEC_APP_TARGET / SPECDEC_APP_DRAFT say
otherwise, with the cross-run batching app.py turns on), serves it on a local port, and lets
`--clients` new sessions run one /generate each (`--max-new-tokens` tokens, the app's defaults),
`--bursts` times. After each burst, with every run finished, it reports per session: the bytes its
`Session` holds of its own (`app/footprint.py`: records, summary, settings; shared models not
counted), how many feature-draft models the sessions reference (one: the memoized draft), and the
bytes of Gradio's state for the session (its copy of every component's config and the last values
shown: strings it shares with the app's blocks are counted too, so this is an upper bound); and the
process's resident memory.

    .venv/bin/python scripts/session_memory.py [--clients 10] [--bursts 3] [--port 7892]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--port", type=int, default=7892)
    args = ap.parse_args(argv)
    if args.clients < 1 or args.bursts < 1:
        print("error: --clients and --bursts must be >= 1", file=sys.stderr)
        return 2
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from gradio_client import Client

    from app.capacity import configure, model_slots
    from app.footprint import deep_bytes, session_bytes
    from app.layout import build_demo, launch_kwargs
    from app.session import Session
    from decoding.eval.procstat import release_free_memory, rss_mb

    configure(model_slots())
    demo = build_demo()
    demo.launch(server_name="127.0.0.1", server_port=args.port, prevent_thread_lock=True, quiet=True,
                **launch_kwargs())
    url = f"http://127.0.0.1:{args.port}/"

    def run(i: int) -> None:
        client = Client(url, verbose=False)
        try:
            client.predict(prompt=f"Student {i}: list three animals that start with the letter {chr(65 + i % 26)}.",
                           chat=True, seed=i, max_new_tokens=args.max_new_tokens, api_name="/generate")
        finally:
            client.close()

    try:
        run(0)  # the models load
        gc.collect()
        print(f"after one run: resident {rss_mb():.0f} MB")
        for burst in range(args.bursts):
            t0 = time.perf_counter()
            threads = [threading.Thread(target=run, args=(i,)) for i in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            gc.collect()
            release_free_memory()
            states = list(demo.state_holder.session_data.values())
            sessions = [v for s in states for v in s.state_data.values() if isinstance(v, Session) and v.records]
            own = [session_bytes(s) for s in sessions]
            gradio = [deep_bytes(s.config_values) for s in states]
            features = {id(s.draft.feature) for s in sessions if s.draft is not None and s.draft.feature is not None}
            print(f"burst {burst + 1} ({time.perf_counter() - t0:.0f} s): {len(sessions)} sessions that ran, "
                  f"Session {sum(own) / len(own) / 1e3:.0f} kB each (max {max(own) / 1e3:.0f} kB), "
                  f"Gradio's state <= {sum(gradio) / len(gradio) / 1e3:.0f} kB each, "
                  f"feature-draft models held {len(features)}, resident {rss_mb():.0f} MB", flush=True)
    finally:
        demo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
