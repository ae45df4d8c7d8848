"""Devices and dtypes: which device a run uses, which precision a model loads in, waiting for
queued GPU work before a clock or an energy counter is read, and the process's device switches
(`env_flag`, ZeroGPU)."""

from __future__ import annotations

import os
import re

import torch

from ..errors import ModelLoadError

__all__ = ["resolve_device", "resolve_dtype", "default_dtype", "default_draft_dtype", "resolve_draft_dtype", "sync",
           "pick_device", "cpu_has_native_bf16", "dtype_name", "usable_cores", "DTYPE_ENV", "env_flag", "ZERO_GPU_ENV",
           "on_zero_gpu"]

ZERO_GPU_ENV = "SPACES_ZERO_GPU"  # set by Hugging Face's ZeroGPU hardware (as app/zerogpu.py reads it)


def env_flag(env: str, default: bool) -> bool:
    """An on/off environment switch: unset or empty gives `default`; 0, false, no, off are off; anything else on."""
    value = os.environ.get(env, "").strip().lower()
    return default if not value else value not in ("0", "false", "no", "off")


def on_zero_gpu() -> bool:
    """Whether this process runs on Hugging Face's ZeroGPU hardware (SPACES_ZERO_GPU set)."""
    return env_flag(ZERO_GPU_ENV, False)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """None/"auto": cuda when available, else cpu. Otherwise validate "cpu", "cuda", "cuda:N"
    or "mps" against the hardware; anything else raises ModelLoadError."""
    if device is None or (isinstance(device, str) and device.strip().lower() in ("", "auto")):
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    text = str(device).strip().lower()
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", text):
        raise ModelLoadError(
            f"unknown device '{device}': use auto, cpu, cuda, cuda:N or mps"
        )
    dev = torch.device(text)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device '{device}' requested but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device '{device}' requested but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ModelLoadError(f"device '{device}' requested but MPS is not available here")
    return dev


DTYPE_ENV = "SPECDEC_DTYPE"  # float32 | bfloat16 | float16 | auto: overrides the default precision


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes in bfloat16 natively (AVX512-BF16 or AMX). Without it, bfloat16
    matmuls are emulated and slower than float32."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability == "AMX":
        return True
    if capability != "AVX512":
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def default_dtype(device: torch.device) -> torch.dtype:
    """The precision a target loads in when none is asked for: $SPECDEC_DTYPE if set; on CUDA
    bfloat16 where supported, else float16; on a CPU with native bfloat16 (AVX512-BF16 or AMX)
    bfloat16, else float32 (also on MPS).

    Why bfloat16 on such CPUs: a target pass over k new tokens then costs little more than one
    token's pass for small k, far less so than in float32 (`python -m decoding verify-cost`
    measures it; docs/performance.md), which is what speculative decoding's speed rests on.
    float32 stays the reference precision of every exactness claim, and is one flag or control away.
    """
    forced = os.environ.get(DTYPE_ENV, "").strip().lower()
    if forced and forced != "auto":
        if forced not in _DTYPE_NAMES:
            raise ModelLoadError(f"{DTYPE_ENV}={forced!r} is not a dtype: use auto, float32, bfloat16 or float16")
        return _DTYPE_NAMES[forced]
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if dev.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return torch.float32


def default_draft_dtype(device: torch.device) -> torch.dtype:
    """A draft's default dtype: as the target's, except on AVX-512 CPUs without native bfloat16,
    where it is float16.

    A draft's precision cannot touch exactness: q is computed in float32 from whatever logits the
    draft produced, and acceptance corrects toward p for any q. A single-token step of these small
    models is bound by reading the weights, so half-precision weights nearly halve it. float16
    steps a little faster than bfloat16 on CPUs without native bfloat16, but its passes over many
    tokens (a long prompt) are far slower than bfloat16's and float32's (`experiments/draft_dtype.py`
    measures both). The hybrid's draft makes such passes at every long prompt and after
    copied spans, so where bfloat16 is native (the target's default there too) the draft follows
    the target; without AVX-512 the float16 kernels are not measured: the target's dtype as well.
    """
    dev = torch.device(device)
    if dev.type == "cpu" and torch.backends.cpu.get_cpu_capability() in ("AVX512", "AMX") and not cpu_has_native_bf16():
        return torch.float16
    return default_dtype(dev)


def dtype_name(dtype) -> str | None:
    """"bfloat16" for torch.bfloat16 (None stays None): how records and tables name a precision."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


def resolve_draft_dtype(draft_dtype, dtype, device) -> torch.dtype:
    """The dtype a draft loads in: `draft_dtype` when given, else `dtype` (the target's, when the
    user chose one), else `default_draft_dtype`."""
    dev = resolve_device(device)
    if draft_dtype is not None and str(draft_dtype).strip().lower() != "auto":
        return resolve_dtype(draft_dtype, dev)
    if dtype is not None and str(dtype).strip().lower() != "auto":
        return resolve_dtype(dtype, dev)
    return default_draft_dtype(dev)


_DTYPE_NAMES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return default_dtype(device)
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ModelLoadError(f"dtype {dtype} is not a floating-point type")
        return dtype
    text = str(dtype).strip().lower().removeprefix("torch.")
    if text in ("", "auto"):
        return default_dtype(device)
    if text not in _DTYPE_NAMES:
        raise ModelLoadError(f"unknown dtype '{dtype}': use auto, float32, bfloat16 or float16")
    return _DTYPE_NAMES[text]


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock timings and energy reads cover it."""
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def pick_device() -> torch.device:
    """cuda when available, else cpu (training and tools that take no --device)."""
    return resolve_device(None)
