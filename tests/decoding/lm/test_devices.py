"""Devices and dtypes (`decoding/lm/devices.py`): which device a run uses, the default precision, and the
draft's dtype rule (a half-precision draft beside a float32 target on AVX-512 CPUs)."""

from __future__ import annotations

import pytest
import torch

from decoding.lm.models import ModelLoadError, default_dtype, load_draft, resolve_device, resolve_draft_dtype


def test_resolve_draft_dtype_rules(monkeypatch):
    assert resolve_draft_dtype("bf16", "float32", "cpu") == torch.bfloat16  # explicit wins
    assert resolve_draft_dtype(None, "float32", "cpu") == torch.float32  # follows a chosen --dtype
    assert resolve_draft_dtype("auto", "bfloat16", "cpu") == torch.bfloat16
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert resolve_draft_dtype(None, None, "cpu") == torch.float16
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: True)  # bfloat16 native: as the target
    assert resolve_draft_dtype(None, None, "cpu") == default_dtype(torch.device("cpu")) == torch.bfloat16
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert resolve_draft_dtype(None, None, "cpu") == default_dtype(torch.device("cpu")) == torch.float32


def test_load_draft_applies_the_rule(tiny_draft_dir, monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert load_draft(str(tiny_draft_dir), "cpu").model.dtype == torch.float16
    assert load_draft(str(tiny_draft_dir), "cpu", dtype="float32").model.dtype == torch.float32
    assert load_draft(str(tiny_draft_dir), "cpu", draft_dtype="bf16", cached=True).model.dtype == torch.bfloat16


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type in ("cpu", "cuda")
    assert resolve_device("auto") == resolve_device(None)
    for bad in ("nonsense", "gpu", "cuda:x"):
        with pytest.raises(ModelLoadError, match="unknown device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="CUDA is not available"):
            resolve_device("cuda")
    with pytest.raises(ModelLoadError):
        resolve_device("cuda:99")


def test_default_dtype(monkeypatch):
    """The default precision follows the device's capabilities (faked here), and the environment."""
    from decoding.lm import devices

    monkeypatch.delenv(devices.DTYPE_ENV, raising=False)
    monkeypatch.setattr(devices, "cpu_has_native_bf16", lambda: False)
    assert default_dtype(torch.device("cpu")) == torch.float32
    monkeypatch.setattr(devices, "cpu_has_native_bf16", lambda: True)
    assert default_dtype(torch.device("cpu")) == torch.bfloat16
    assert default_dtype(torch.device("mps")) == torch.float32
    for bf16, want in ((True, torch.bfloat16), (False, torch.float16)):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, _v=bf16, **k: _v)
        assert default_dtype(torch.device("cuda")) == want
    monkeypatch.setenv(devices.DTYPE_ENV, "float32")
    assert default_dtype(torch.device("cpu")) == torch.float32
    assert default_dtype(torch.device("cuda")) == torch.float32
    monkeypatch.setenv(devices.DTYPE_ENV, "auto")
    assert default_dtype(torch.device("cpu")) == torch.bfloat16
    monkeypatch.setenv(devices.DTYPE_ENV, "int3")
    with pytest.raises(ModelLoadError, match="SPECDEC_DTYPE"):
        default_dtype(torch.device("cpu"))


def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch, tmp_path):
    from decoding.lm import devices

    flags = {"AVX512": True, "AVX2": False, "AMX": True}
    for capability, _ in flags.items():
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
        if capability == "AVX2":
            assert devices.cpu_has_native_bf16() is False  # no AVX-512: emulated bfloat16
        if capability == "AMX":
            assert devices.cpu_has_native_bf16() is True
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    real_open = open

    def fake_cpuinfo(text):
        def opener(path, *a, **k):
            if str(path) == "/proc/cpuinfo":
                (tmp_path / "cpuinfo").write_text(text)
                return real_open(tmp_path / "cpuinfo", *a, **k)
            return real_open(path, *a, **k)
        return opener

    monkeypatch.setattr("builtins.open", fake_cpuinfo("flags\t: fpu avx512f avx512_bf16 sse\n"))
    assert devices.cpu_has_native_bf16() is True
    monkeypatch.setattr("builtins.open", fake_cpuinfo("flags\t: fpu avx512f sse\n"))
    assert devices.cpu_has_native_bf16() is False
