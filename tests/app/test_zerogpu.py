"""ZeroGPU readiness (app/zerogpu.py). A stand-in `spaces` module (tests/zerogpu_standin) records
what it wraps and calls: with SPACES_ZERO_GPU set, the app builds and one generation, one step and
one race run through the wrapped functions, one GPU call each, with arguments and records crossing
pickle; without it nothing is wrapped. The GPU duration grows with max new tokens within the limit."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from app import zerogpu
from app.settings import Settings

STANDIN = Path(__file__).resolve().parents[1] / "zerogpu_standin"


def drive(tmp_path, tiny_target_dir, tiny_draft_dir, zero: bool) -> tuple[dict, list]:
    log = tmp_path / "spaces.jsonl"
    env = {**os.environ, "STANDIN_SPACES_LOG": str(log), "SPECDEC_APP_TARGET": str(tiny_target_dir),
           "SPECDEC_APP_DRAFT": str(tiny_draft_dir), "SPECDEC_DTYPE": "float32", "GRADIO_ANALYTICS_ENABLED": "False",
           "PYTHONPATH": os.pathsep.join([str(STANDIN), os.environ.get("PYTHONPATH", "")])}
    env.pop(zerogpu.ZERO_GPU_ENV, None)
    if zero:
        env[zerogpu.ZERO_GPU_ENV] = "true"
    proc = subprocess.run([sys.executable, str(STANDIN / "drive_app.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert "error" not in result, result["error"]
    entries = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return result, entries


def test_on_zerogpu_each_run_and_race_is_one_gpu_call(tmp_path, tiny_target_dir, tiny_draft_dir):
    result, entries = drive(tmp_path, tiny_target_dir, tiny_draft_dir, zero=True)
    wrapped = {e["name"] for e in entries if e["event"] == "wrap"}
    calls = [e for e in entries if e["event"] == "call"]
    assert {"whole_run", "whole_race"} <= wrapped
    # /generate: one call; /step on a fresh session: one call; two steps of one run: one call; /race: one
    # call for both lanes; /compare: one call per method
    assert [c["name"] for c in calls] == ["whole_run", "whole_run", "whole_run", "whole_race", "whole_run", "whole_run"]
    assert all(zerogpu.MIN_GPU_SECONDS <= c["duration"] <= zerogpu.MAX_GPU_SECONDS for c in calls)
    assert result["generate_text"].strip() and result["generate_playback_tokens"] > 0
    assert "one GPU call computed the whole run" in result["step_stats"]
    # the second Step reveals the next iteration of the run computed by the first, without a GPU call
    assert [t["value"] if isinstance(t, dict) else t for t in result["steps_timeline"]] == [1, 2]  # from 1
    assert result["race_lanes"] == 2 and result["race_result"]
    text_a, text_b, table = result["compare"]
    assert text_a == text_b and "tokens/s" in table  # greedy: the same text from both methods


def test_off_zerogpu_nothing_is_wrapped(tmp_path, tiny_target_dir, tiny_draft_dir):
    result, entries = drive(tmp_path, tiny_target_dir, tiny_draft_dir, zero=False)
    assert entries == []
    assert result["generate_text"].strip() and result["race_lanes"] == 2
    assert "GPU call" not in result["step_stats"]


def _settings(tokens: int, method: str = "speculative") -> Settings:
    return Settings("hi", False, method, 4, 0.0, 0, 1.0, 1.0, 0, tokens, "t", "d")


@pytest.mark.parametrize("params", [135e6, 1.7e9, 7e9])
def test_the_gpu_duration_grows_with_max_new_tokens_within_the_limit(params):
    asked = [zerogpu.run_seconds(_settings(n), params) for n in (1, 16, 64, 128, 256, 1024)]
    assert asked == sorted(asked) and asked[0] < asked[-1]
    assert all(zerogpu.MIN_GPU_SECONDS <= s <= zerogpu.MAX_GPU_SECONDS for s in asked)
    assert zerogpu.run_seconds(_settings(64, "mjsd"), params) >= zerogpu.run_seconds(_settings(64), params)
    assert zerogpu.MIN_GPU_SECONDS <= zerogpu.race_seconds(_settings(256), _settings(256)) <= zerogpu.MAX_GPU_SECONDS


def test_the_records_of_a_run_are_picklable(tiny_target_dir, tiny_draft_dir):
    from decoding.lm.models import load_model
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    target, draft = load_model(str(tiny_target_dir)), load_model(str(tiny_draft_dir))
    for method in ("speculative", "mentored", "mjsd", "ppd"):
        config = RunConfig(method=method, max_new_tokens=8, sampling=SamplingConfig(temperature=0.7), seed=1)
        records, summary = generate(target, draft, "the cat", config)
        assert pickle.loads(pickle.dumps(records)) == records
        assert pickle.loads(pickle.dumps(summary)) == summary


def test_the_space_preloads_every_hub_model_of_the_presets(monkeypatch):
    import re

    from app.presets import presets
    from decoding.paths import REPO

    for var in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT"):
        monkeypatch.delenv(var, raising=False)
    front = (REPO / "README.md").read_text(encoding="utf-8").split("---")[1]
    listed = set(re.findall(r"^\s+- (\S+)$", front.split("preload_from_hub:")[1], flags=re.M))
    needed = {spec for p in presets() for spec in (p.target, p.draft) if re.fullmatch(r"[\w.-]+/[\w.-]+", spec or "")}
    assert needed and needed <= listed, needed - listed


def test_on_zerogpu_a_custom_model_is_refused_with_a_message(monkeypatch):
    import gradio as gr

    from app.live import load_models

    monkeypatch.setenv(zerogpu.ZERO_GPU_ENV, "true")
    with pytest.raises(gr.Error, match="cannot load a custom model"):
        load_models("someone/some-model", "prompt-lookup", True)
