"""A class presses Run at once (a small burst on the tiny models): nobody is refused, each client
gets its own result, and a paced run does not hold a model slot while it plays, so a paced burst
takes about as long as an unpaced one; with the default kind of pair (the hybrid with a feature
draft) the runs share the passes of both models and leave only their packed records behind
(scripts/classroom_load.py is the full-size version)."""

import json
import threading
import time

import pytest

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import Client  # noqa: E402

from _app_server import running_app  # noqa: E402

pytestmark = pytest.mark.slow  # bursts of eight runs on a live server

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
    """The app as it serves a class on a CPU (decoding/lm/batching.py on, as app.py turns it on):
    every client gets its own run, with the tokens it gets without batching (float32), the passes
    really served several runs, and the result says the run shared them."""
    from decoding.lm import batching

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


def test_a_burst_with_a_feature_draft_shares_both_models_passes_and_leaves_packed_records(tiny_target_dir,
                                                                                          tiny_feature_dir,
                                                                                          monkeypatch):
    """The app's default kind of pair on the tiny target (the hybrid with a feature draft): with
    cross-run batching on, every client gets its own run with the tokens it gets without batching
    (float32); passes of the target and of the feature draft's layer each served several runs; after
    the burst every session holds its packed records and no generator, a few kB each."""
    from app.footprint import session_bytes
    from app.packed import PackedRecords
    from app.session import Session
    from decoding.lm import batching

    served = []
    real = batching.batched_forward

    def counted(model, calls):
        served.append((type(model).__name__, len(calls)))
        return real(model, calls)

    monkeypatch.setattr(batching, "batched_forward", counted)
    texts = lambda rows: [[(t.get("text"), t.get("kind")) for t in r["playback"]["lanes"][0]["tokens"]]  # noqa: E731
                          for r in rows]
    with running_app(tiny_target_dir, f"hybrid:{tiny_feature_dir}", with_demo=True) as (url, demo):
        clients = [Client(url, verbose=False) for _ in range(CLIENTS)]
        burst(clients[:2], 0.0)  # warm-up: the models load once
        _, alone = burst(clients, PACING)
        batching.enable(max_batch=CLIENTS)
        try:
            _, batched = burst(clients, PACING)
        finally:
            batching.disable()
        sessions = [value for state in list(demo.state_holder.session_data.values())
                    for value in state.state_data.values() if isinstance(value, Session)]
    for r in alone + batched:
        assert r["error"] is None, r["error"]
        assert r["own"], "a client got someone else's result"
    assert texts(batched) == texts(alone)
    most = {name: max(size for n, size in served if n == name) for name, _ in served}
    assert most.get("LlamaForCausalLM", 0) > 1 and most.get("FeatureDraftModel", 0) > 1, served
    ran = [s for s in sessions if s.records]
    assert len(ran) == CLIENTS
    for session in ran:
        assert isinstance(session.records, PackedRecords) and session.generator is None
        assert session_bytes(session) < session.records.nbytes + 16_000


def test_the_class_load_script_reads_the_apps_outputs(tiny_target_dir, tiny_draft_dir, capsys):
    """scripts/classroom_load.py against the app (a burst of 3 on the tiny pair): its warm-up finds the
    pair, the precision and the plain speed, and each client recognises its own result, read from the
    outputs the app's API names (the check that fails when an app change moves /generate's outputs)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "classroom_load.py"
    spec = importlib.util.spec_from_file_location("classroom_load", path)
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        result = load.main(["--url", url, "--clients", "3", "--within", "0.5", "--max-new-tokens", "8",
                            "--plain-tokens", "8", "--pacing", "0", "--json"])
    assert result == 0
    out = json.loads(next(line for line in capsys.readouterr().out.splitlines() if line.startswith('{"date"')))
    machine, burst = out["machine"], out["bursts"][0]
    assert machine["precision"] == "float32" and machine["plain_tokens_per_second"] > 0 and machine["draft"]
    assert burst["served"] == 3 and burst["own_result"] == "3/3" and burst["errors"] == []
