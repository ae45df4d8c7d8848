"""The app driven through gradio_client, on the tiny random models: a streamed run, a step, the
exactness lab, and readable errors for bad input."""

import pytest

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import Client  # noqa: E402

from _app_server import running_app  # noqa: E402


@pytest.fixture(scope="module")
def client(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield Client(url, verbose=False)


# outputs of /generate and /step, in order (the session state is not part of the API)
STATS, TIMELINE, CAPTION, CHIPS, TEXT, DRAFT_ROW, PQ, RESIDUAL, TREE, RUNNING, THEORY, THEORY_MD, CLI, DOWNLOAD = range(14)
PLAYBACK, STATUS = -2, -1  # the browser player, last of the view's outputs, then the status line


def test_generate_streams_iterations_and_ends_with_text(client, monkeypatch):
    from app.explainer import handlers

    monkeypatch.setattr(handlers, "LIGHT_SECONDS", 0.0)  # every iteration refreshes (the app runs in-process)
    job = client.submit(prompt="the cat sat", chat=False, method="speculative", gamma=3, temperature=0,
                        seed=0, max_new_tokens=16, pacing=0, api_name="/generate")
    final = job.result(timeout=120)
    outputs = job.outputs()
    assert len(outputs) >= 3, "the run should stream several iterations"
    assert final[TEXT].strip() != ""
    assert "chip" in final[CHIPS] and "Live run" in final[STATS]
    assert "python -m decoding generate" in final[CLI] and "--method speculative" in final[CLI]
    # plots arrive as plotly JSON
    assert final[RUNNING] is not None and final[PQ] is not None
    # the timeline grew with the run
    assert outputs[-1][TIMELINE] is not None
    # the run downloads as a trace file that replays (the CLI's --json format)
    from app.session import read_trace

    download = final[DOWNLOAD]  # a gr.update carrying the file path
    records, summary = read_trace(download.get("value") if isinstance(download, dict) else download)
    assert len(records) >= len(outputs) - 1
    assert summary is not None and summary.text.strip() != "" and summary.method == "speculative"


def test_paced_run_decodes_at_full_speed_and_plays_in_the_browser(client):
    """Pacing never sleeps on the server: the run's records go to the browser player, one iteration
    every `pacing` seconds, and the call returns in far less than the playback takes."""
    import time

    t0 = time.perf_counter()
    final = client.predict(prompt="the cat sat", chat=False, method="speculative", gamma=3, temperature=0, seed=0,
                           max_new_tokens=16, pacing=0.5, api_name="/generate")
    wall = time.perf_counter() - t0
    played = final[PLAYBACK]
    lane = played["lanes"][0]
    times = sorted({t["time"] for t in lane["tokens"]})
    assert times == pytest.approx([0.5 * i for i in range(len(times))])  # the first iteration at once
    # the panels start where the player starts, at the first iteration, and follow it as it plays
    whole = "".join(t["text"] for t in lane["tokens"])
    first = "".join(t["text"] for t in lane["tokens"] if t["it"] == 0)
    assert final[TEXT] == first and whole.startswith(first) and final[TIMELINE]["value"] == 1
    assert played["sync"] == "explainer" and played["current"] is None and 0 <= played["rest"] < len(times)
    assert lane["summary"]["target_calls"] >= len(times)
    assert wall < 0.5 * len(times), f"a paced run held the server for {wall:.1f} s"


def test_autoregressive_and_step(client):
    final = client.predict(prompt="hello", method="autoregressive", temperature=0, max_new_tokens=6, pacing=0,
                           api_name="/generate")
    assert final[TEXT] != ""
    step = client.predict(prompt="the cat sat", method="speculative", gamma=2, max_new_tokens=8, api_name="/step")
    assert "Iteration 0" in step[DRAFT_ROW] or "iteration" in step[DRAFT_ROW].lower()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prompt=""), "prompt is empty"),
        (dict(prompt="hi", gamma=0), "0"),
        (dict(prompt="hi", temperature=-1), "minimum"),
        (dict(prompt="x" * 5000), "at most"),
    ],
)
def test_bad_input_gives_a_readable_error(client, kwargs, message):
    with pytest.raises(Exception) as info:
        client.predict(api_name="/generate", **kwargs)
    assert message in str(info.value)
    assert "Traceback" not in str(info.value)


def test_lab_endpoint(client):
    plot, residual, tv, md, status = client.predict(
        {"headers": ["token", "p (target)", "q (draft)"],
         "data": [["a", 0.4, 0.5], ["b", 0.3, 0.25], ["c", 0.2, 0.15], ["d", 0.1, 0.1]]},
        1.0, 10_000, 0, api_name="/lab")
    assert "α = 0.9" in md and "TV" in md


def test_side_by_side_reports_measured_speedup(client):
    text_a, text_b, table, _status = client.predict(prompt="the cat sat", method_a="speculative",
                                                    method_b="autoregressive", temperature=0, max_new_tokens=8,
                                                    api_name="/compare")
    assert text_a and text_b
    assert "tokens/s" in table and ("faster" in table or "slower" in table)
    # greedy decoding is lossless token for token: both methods give the same text here
    assert text_a == text_b


def test_lab_converge_streams_growing_n(client):
    job = client.submit({"headers": ["token", "p (target)", "q (draft)"],
                         "data": [["a", 0.4, 0.5], ["b", 0.3, 0.25], ["c", 0.2, 0.15], ["d", 0.1, 0.1]]},
                        1.0, 0, api_name="/lab_converge")
    job.result(timeout=60)
    mds = [o[3] for o in job.outputs()]
    assert len(mds) >= 3 and "N = 100 " in mds[0] and "1,000,000" in mds[-1]


CUSTOM = "Custom: type a target and a draft below"


def test_unloadable_pairs_give_clear_errors(client, tiny_target_dir, tiny_other_vocab_dir, monkeypatch):
    monkeypatch.setenv("SPECDEC_APP_ALLOW_LOCAL", "1")  # the app runs in this process
    with pytest.raises(Exception) as info:
        client.predict(preset=CUSTOM, custom_target=str(tiny_target_dir), custom_draft=str(tiny_other_vocab_dir),
                       prompt="the cat", max_new_tokens=4, api_name="/generate")
    assert "different vocabularies" in str(info.value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Exception) as info:
        client.predict(preset=CUSTOM, custom_target="no-such-org/no-such-model", custom_draft="prompt-lookup",
                       prompt="the cat", max_new_tokens=4, api_name="/generate")
    assert "Could not load" in str(info.value) and "no-such-org/no-such-model" in str(info.value)


def test_local_paths_are_refused_by_default(client, tiny_target_dir, monkeypatch):
    monkeypatch.delenv("SPECDEC_APP_ALLOW_LOCAL", raising=False)
    with pytest.raises(Exception) as info:
        client.predict(preset=CUSTOM, custom_target=str(tiny_target_dir), prompt="the cat", api_name="/generate")
    assert "local paths are disabled" in str(info.value)
