"""The measured device in the words docs/gpu.md gives it: name, driver, CUDA/torch versions, date."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess


def driver_version() -> str:
    """The NVIDIA driver version from NVML, else from nvidia-smi, else why neither answered."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - no pynvml or no NVML: try nvidia-smi
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "unknown (neither NVML nor nvidia-smi answered)"


def device_info(device: str = "cuda") -> dict:
    """Name, compute capability, memory, driver, CUDA and cuDNN of torch's build, versions and date."""
    import torch

    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    try:
        import transformers

        transformers_version = transformers.__version__
    except ImportError:
        transformers_version = None
    return {
        "device": torch.cuda.get_device_name(dev),
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "bf16": bool(torch.cuda.is_bf16_supported()),
        "driver": driver_version(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "transformers": transformers_version,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
