"""A pair warmed up before its first visitor (`decoding/run/warm_up.py`) and the app's start-up use of it on a
dedicated CUDA GPU (`app/zerogpu.py`'s warm_up_on_gpu)."""

from __future__ import annotations

import torch

from decoding.lm import backend
from decoding.run import warm_up as warm


def test_warm_up_decodes_with_the_pair_on_the_static_path(tiny_pair, monkeypatch):
    """The warm-up runs the pair's passes (the target's and the draft's), here on the static path as on a GPU."""
    target, draft = tiny_pair
    monkeypatch.setenv("SPECDEC_BACKEND", "static")
    monkeypatch.setattr(backend, "_used", type(backend._used)())  # no LM built on any model yet
    assert backend.describe(target.model)["backend"] == "dynamic"
    assert warm.warm_up(target, draft, tokens=4) > 0
    assert backend.describe(target.model)["backend"] == "static"  # the target's static LM was built and ran
    assert backend.describe(draft.model)["backend"] == "static"  # and the draft's


def test_warm_up_on_gpu_starts_nothing_without_cuda_or_on_zerogpu(monkeypatch):
    from app import zerogpu

    lines = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert zerogpu.warm_up_on_gpu("t", "d", log=lines.append) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert zerogpu.warm_up_on_gpu("t", "d", log=lines.append) is None and lines == []


def test_warm_up_on_gpu_loads_and_warms_the_pair_in_a_thread_and_says_so(tiny_target_dir, tiny_draft_dir,
                                                                         monkeypatch):
    """With CUDA (pretended; the pair loads on the CPU here) the pair is loaded and warmed in a background thread,
    which logs one line; a pair that cannot load logs a warning instead of stopping the app."""
    from app import zerogpu

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(zerogpu, "device", lambda: "cpu")
    lines = []
    zerogpu.warm_up_on_gpu(str(tiny_target_dir), str(tiny_draft_dir), log=lines.append).join(timeout=120)
    assert len(lines) == 1 and lines[0].startswith("warm-up: ") and "ready on the GPU in" in lines[0]
    zerogpu.warm_up_on_gpu("/no/such/model", str(tiny_draft_dir), log=lines.append).join(timeout=120)
    assert len(lines) == 2 and lines[1].startswith("warning: warm-up of /no/such/model")
