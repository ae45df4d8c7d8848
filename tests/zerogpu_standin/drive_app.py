"""Start the app as `app.py` does (so on ZeroGPU it preloads and wraps), launch it on a free port,
and drive one generation, one step and one race through gradio_client; print the results as JSON.
Run by tests/app/test_zerogpu.py in a fresh process (the decorators apply at import time)."""

import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))

from _app_server import free_port  # noqa: E402

namespace = runpy.run_path(str(ROOT / "app.py"), run_name="app_under_test")
demo = namespace["demo"]
port = free_port()
demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
from gradio_client import Client  # noqa: E402

client = Client(f"http://127.0.0.1:{port}/", verbose=False)
out = {}
try:
    final = client.predict(prompt="the cat sat", chat=False, method="speculative", gamma=3, temperature=0, seed=0,
                           max_new_tokens=12, pacing=0.3, api_name="/generate")
    out["generate_text"] = final[4]
    out["generate_playback_tokens"] = len(final[-2]["lanes"][0]["tokens"])  # the player, then the status line
    step = client.predict(prompt="a dog ran", chat=False, method="speculative", gamma=3, temperature=0, seed=0,
                          max_new_tokens=12, api_name="/step")
    out["step_stats"] = step[0]
    step2 = Client(f"http://127.0.0.1:{port}/", verbose=False)
    s1 = step2.predict(prompt="a dog ran", chat=False, method="speculative", gamma=3, temperature=0, seed=0,
                       max_new_tokens=12, api_name="/step")
    s2 = step2.predict(prompt="a dog ran", chat=False, method="speculative", gamma=3, temperature=0, seed=0,
                       max_new_tokens=12, api_name="/step")
    out["steps_timeline"] = [s1[1], s2[1]]
    player, figures, _, _ = client.predict(prompt="the cat sat", lane_a="speculative", lane_b="autoregressive",
                                        temperature=0, max_new_tokens=8, api_name="/race")
    out["race_lanes"] = len(player["lanes"])
    out["race_result"] = figures["result"]
    text_a, text_b, table, _ = client.predict(prompt="the cat sat", method_a="speculative", method_b="autoregressive",
                                           temperature=0, max_new_tokens=8, api_name="/compare")
    out["compare"] = [text_a, text_b, table]
except Exception as exc:  # noqa: BLE001 - reported to the test
    out["error"] = str(exc)
finally:
    demo.close()
print("RESULT " + json.dumps(out, default=str))
