"""The app's model slots and torch threads per run (app/capacity.py)."""

import pytest

from app import capacity


def test_batched_slots_share_every_core_and_turn_batching_on(monkeypatch):
    from decoding.lm import batching

    monkeypatch.delenv(capacity.SLOTS_ENV, raising=False)
    monkeypatch.delenv(capacity.BATCHING_ENV, raising=False)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("decoding.lm.devices.usable_cores", lambda: 2)
    monkeypatch.setattr("torch.set_num_threads", lambda n: None)
    assert capacity.batching_on()
    assert capacity.model_slots() == capacity.BATCHED_SLOTS
    assert capacity.threads_per_run(capacity.BATCHED_SLOTS) == 2  # one pass at a time, on every core
    try:
        assert capacity.configure(capacity.BATCHED_SLOTS) == 2
        assert batching.batcher() is not None
    finally:
        batching.disable()
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert not capacity.batching_on()  # a GPU run keeps its own passes
    monkeypatch.setenv(capacity.BATCHING_ENV, "yes please")
    with pytest.raises(ValueError, match=capacity.BATCHING_ENV):
        capacity.batching_on()


def test_without_batching_one_slot_per_usable_core_on_a_cpu(monkeypatch):
    monkeypatch.delenv(capacity.SLOTS_ENV, raising=False)
    monkeypatch.setenv(capacity.BATCHING_ENV, "0")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("decoding.lm.devices.usable_cores", lambda: 2)
    assert capacity.model_slots() == 2
    assert capacity.threads_per_run(2) == 1
    monkeypatch.setattr("decoding.lm.devices.usable_cores", lambda: 64)
    assert capacity.model_slots() == capacity.MAX_CPU_SLOTS
    assert capacity.threads_per_run(capacity.MAX_CPU_SLOTS) == 64 // capacity.MAX_CPU_SLOTS


def test_the_environment_overrides_and_bad_values_are_named(monkeypatch):
    monkeypatch.setenv(capacity.BATCHING_ENV, "0")
    monkeypatch.setenv(capacity.SLOTS_ENV, "1")
    assert capacity.model_slots() == 1
    for bad in ("0", "two", "-3"):
        monkeypatch.setenv(capacity.SLOTS_ENV, bad)
        with pytest.raises(ValueError, match=capacity.SLOTS_ENV):
            capacity.model_slots()
    monkeypatch.setenv(capacity.THREADS_ENV, "1")  # the torch threads, whatever the slots and the cores
    monkeypatch.setattr("decoding.lm.devices.usable_cores", lambda: 16)
    assert capacity.threads_per_run(1) == capacity.threads_per_run(8) == 1
    monkeypatch.delenv(capacity.BATCHING_ENV)
    assert capacity.threads_per_run(capacity.BATCHED_SLOTS) == 1
    for bad in ("0", "all", "1.5"):
        monkeypatch.setenv(capacity.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=capacity.THREADS_ENV):
            capacity.threads_per_run(2)


@pytest.mark.parametrize("name, value", [(capacity.SLOTS_ENV, "two"), (capacity.THREADS_ENV, "0")])
def test_the_app_refuses_a_bad_setting_with_its_message_and_exit_2(name, value):
    """`python app.py` with a bad SPECDEC_MODEL_SLOTS or SPECDEC_TORCH_THREADS: one line on stderr naming the
    setting, exit status 2 (bad input), no traceback, nothing launched."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, name: value, "GRADIO_ANALYTICS_ENABLED": "False"}
    done = subprocess.run([sys.executable, "app.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"error: {name}" in done.stderr and "Traceback" not in done.stderr
    assert "Running on" not in done.stdout


def test_concurrent_runs_sharing_the_models_give_the_tokens_of_runs_one_at_a_time(tiny_target_dir, tiny_draft_dir):
    """The app's slots run several decodes at once on one shared copy of each model: nothing in a
    model may carry one run's state into another."""
    from concurrent.futures import ThreadPoolExecutor

    from decoding.lm.models import load_model
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    target, draft = load_model(str(tiny_target_dir)), load_model(str(tiny_draft_dir))
    jobs = [(method, f"prompt {i} is", i) for i in range(4) for method in ("speculative", "mjsd", "autoregressive")]

    def run(job):
        method, prompt, seed = job
        config = RunConfig(method=method, max_new_tokens=12, sampling=SamplingConfig(temperature=0.8), seed=seed,
                           gamma=3)
        return generate(target, draft, prompt, config)[1].token_ids

    alone = [run(job) for job in jobs]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(run, jobs))
    assert together == alone


def test_the_queue_holds_a_lecture_hall_and_gradio_keeps_a_bounded_number_of_sessions(tiny_target_dir, tiny_draft_dir,
                                                                                       monkeypatch):
    """60 students pressing Run twice wait in line rather than being refused (a waiting event is a
    request body); Gradio's per-session states are bounded (launch's state_session_capacity)."""
    from app.layout import build_demo, launch_kwargs

    monkeypatch.setenv("SPECDEC_APP_TARGET", str(tiny_target_dir))
    monkeypatch.setenv("SPECDEC_APP_DRAFT", str(tiny_draft_dir))
    demo = build_demo()
    assert demo._queue.max_size == capacity.QUEUE_SIZE >= 2 * 60
    assert 500 <= launch_kwargs()["state_session_capacity"] == capacity.SESSION_CAPACITY < 10_000
