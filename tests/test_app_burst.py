"""A class presses Run at once (a small burst on the tiny models): nobody is refused, each client
gets its own result, and a paced run does not hold a model slot while it plays, so a paced burst
takes about as long as an unpaced one (scripts/classroom_load.py is the full-size version)."""

import threading
import time

import pytest

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import Client  # noqa: E402

from _app_server import running_app  # noqa: E402

CLIENTS = 8
TOKENS = 16
PACING = 0.3
CLI = 12  # the "copy as CLI command" output of /generate
PLAYBACK = -2  # the browser player's value (the status line is the last output)


def burst(clients: list, pacing: float) -> tuple[float, list]:
    """Every client submits one run at once; (wall seconds until the last finished, rows)."""
    rows = [None] * len(clients)

    def one(i: int) -> None:
        prompt = f"student {i} says"
        try:
            final = clients[i].predict(prompt=prompt, chat=False, method="speculative", gamma=3, temperature=0,
                                       seed=i, max_new_tokens=TOKENS, pacing=pacing, api_name="/generate")
            rows[i] = {"own": prompt in final[CLI] and f"--seed {i} " in final[CLI], "playback": final[PLAYBACK],
                       "error": None}
        except Exception as exc:  # noqa: BLE001 - a refused client is a result
            rows[i] = {"own": False, "playback": None, "error": str(exc)}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(clients))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return time.perf_counter() - t0, rows


def test_a_paced_burst_is_served_at_the_speed_of_an_unpaced_one(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        clients = [Client(url, verbose=False) for _ in range(CLIENTS)]  # one session each
        burst(clients[:2], 0.0)  # warm-up: the models load once
        unpaced, rows0 = burst(clients, 0.0)
        paced, rows = burst(clients, PACING)
    for r in rows0 + rows:
        assert r["error"] is None, r["error"]
        assert r["own"], "a client got someone else's result"
    iterations = [len({t["time"] for t in r["playback"]["lanes"][0]["tokens"]}) for r in rows]
    # had the server slept the pacing, two slots would have needed at least this long
    server_paced = sum(iterations) * PACING / 2
    print(f"unpaced {unpaced:.2f} s, paced {paced:.2f} s, server-paced bound {server_paced:.1f} s")
    assert paced < server_paced / 2, f"paced burst {paced:.1f} s vs {server_paced:.1f} s if paced on the server"
    assert paced < 1.5 * unpaced + 2.0, f"paced burst {paced:.1f} s vs unpaced {unpaced:.1f} s"


def test_a_burst_with_cross_run_batching_gives_each_client_the_tokens_of_a_lone_burst(tiny_target_dir,
                                                                                      tiny_draft_dir):
    """The app as it serves a class on a CPU (decoding/batching.py on, as app.py turns it on):
    every client gets its own run, with the tokens it gets without batching (float32), the passes
    really served several runs, and the result says the run shared them."""
    from decoding import batching

    def texts(rows):
        return [[(t.get("text"), t.get("kind")) for t in r["playback"]["lanes"][0]["tokens"]] for r in rows]

    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        clients = [Client(url, verbose=False) for _ in range(CLIENTS)]
        burst(clients[:2], 0.0)  # warm-up: the models load once
        _, alone = burst(clients, PACING)
        batching.enable(max_batch=CLIENTS)
        try:
            before = batching.sharing()
            _, batched = burst(clients, PACING)
            passes, calls = (now - then for now, then in zip(batching.sharing(), before))
        finally:
            batching.disable()
    for r in alone + batched:
        assert r["error"] is None, r["error"]
        assert r["own"], "a client got someone else's result"
    assert texts(batched) == texts(alone)
    assert calls > passes, f"{calls} calls in {passes} passes: no pass served two runs"
    assert any("runs each on average" in r["playback"]["result"] for r in batched)
