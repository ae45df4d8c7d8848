"""Energy meters behind one interface: NVML (GPU), RAPL (CPU package) or unavailable.

A meter never invents a number: where nothing can be measured, `read()` returns
`EnergyReading(None, reason)`. Usage (the pattern of Zeus `monitor/energy.py`):

    meter = make_meter(device)
    meter.begin()            # syncs the device, starts a window
    ...                      # decode
    r = meter.read()         # syncs the device; cumulative joules since begin()
                             # (read(fresh=False): the last reading may do, see below)
    energy_per_token(r.joules, tokens, r.seconds)   # None for windows under 1 s

Counters update about every 100 ms while decoding iterations last milliseconds, so
per-iteration traces should carry cumulative joules and per-token figures are only computed
over windows of at least `MIN_WINDOW_SECONDS`. For the same reason `read(fresh=False)` (what a
decoding loop asks at each iteration but its last) may return the last reading, with that reading's
time, where a new one would cost more than it tells: NVML's counter costs about 4 ms a read on an
H200, more than a captured decoding step there.

Also a hardware-independent proxy, always available and labelled as such: bytes of weights
read (target calls x target bytes + draft calls x draft bytes), the quantity the energy
argument of the MJSD paper (Qin et al., section 4) rests on.
"""

from __future__ import annotations

import abc
import glob
import importlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..lm.devices import sync
from ..lm.models.loaded import model_weight_bytes  # defined beside the loader that reports it

__all__ = [
    "EnergyReading",
    "EnergyMeter",
    "NvmlMeter",
    "RaplMeter",
    "UnavailableMeter",
    "make_meter",
    "energy_per_token",
    "MIN_WINDOW_SECONDS",
    "PROXY_LABEL",
    "weight_bytes_read",
    "weight_bytes_per_token",
    "model_weight_bytes",
]

MIN_WINDOW_SECONDS = 1.0
DEFAULT_RAPL_ROOT = "/sys/class/powercap"


@dataclass
class EnergyReading:
    """Cumulative energy of a window. joules is None when not measured; note names the source
    or the reason. seconds is the wall time since begin() (0.0 when no window is open)."""

    joules: float | None
    note: str
    seconds: float = 0.0


class EnergyMeter(abc.ABC):
    """One window at a time: begin() starts it, read() returns joules since begin()."""

    name: str = "meter"
    available: bool = False
    note: str = ""

    @abc.abstractmethod
    def begin(self) -> None: ...

    @abc.abstractmethod
    def read(self, fresh: bool = True) -> EnergyReading:
        """Joules since begin(). fresh=False allows the last reading again (its joules and seconds, which
        stay consistent) where the meter's source updates slower than it is asked."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "EnergyMeter":
        self.begin()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class UnavailableMeter(EnergyMeter):
    """Measures nothing; every reading is None with the reason."""

    name = "none"

    def __init__(self, reason: str):
        self.available = False
        self.note = reason or "energy not measured"
        self._t0: float | None = None

    def begin(self) -> None:
        self._t0 = time.monotonic()

    def read(self, fresh: bool = True) -> EnergyReading:
        seconds = 0.0 if self._t0 is None else time.monotonic() - self._t0
        return EnergyReading(None, self.note, seconds)


def _trapezoid_joules(samples: list[tuple[float, float]]) -> float:
    """Integral of power over time from (seconds, watts) samples, trapezoid rule."""
    return sum((t1 - t0) * (w0 + w1) / 2.0 for (t0, w0), (t1, w1) in zip(samples, samples[1:]))


# --------------------------------------------------------------------------- NVML
def _nvml_index(device: torch.device) -> int | str:
    """NVML index (or UUID) of a torch cuda device, honouring CUDA_VISIBLE_DEVICES."""
    idx = device.index if device.index is not None else (
        torch.cuda.current_device() if torch.cuda.is_available() else 0
    )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if idx < len(entries):
            return int(entries[idx]) if entries[idx].isdigit() else entries[idx]
    return idx


class NvmlMeter(EnergyMeter):
    """NVIDIA GPU energy through NVML (`pynvml`, from the nvidia-ml-py package).

    Uses the total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ, Volta and later)
    where the GPU has it; otherwise integrates nvmlDeviceGetPowerUsage (mW) over time with a
    background thread sampling every `sample_interval_s` (trapezoid). The device is
    synchronized before every reading. Not available -> `available` False and `note` says why.
    Set sample_interval_s <= 0 to sample only at begin() and read(). With the counter, `read(fresh=False)`
    within `min_read_interval_s` of the last counter read returns that reading again (module doc).
    """

    name = "nvml"

    def __init__(
        self,
        device: torch.device | str | int = "cuda",
        *,
        sample_interval_s: float = 0.03,
        min_read_interval_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        force_power: bool = False,
    ):
        if isinstance(device, int):
            device = torch.device("cuda", device)
        self.device = torch.device(device)
        self.sample_interval_s = sample_interval_s
        self.min_read_interval_s = min_read_interval_s
        self._last_read: EnergyReading | None = None  # the counter's last reading in this window
        self._clock = clock
        self.available = False
        self.mode: str | None = None  # "counter" or "power"
        self._nvml = None
        self._handle = None
        self._inited = False
        self._t0: float | None = None
        self._start_mj: int | None = None
        self._last_sample: tuple[float, float] | None = None  # (seconds, watts)
        self._joules = 0.0  # running trapezoid integral since begin()
        self.n_samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            self.note = "pynvml (nvidia-ml-py) not installed: GPU energy not measured"
            return
        self._nvml = nvml
        try:
            nvml.nvmlInit()
            self._inited = True
        except Exception as e:  # NVMLError: no driver / no GPU
            self.note = f"NVML unavailable ({e}): GPU energy not measured"
            return
        target = _nvml_index(self.device)
        try:
            if isinstance(target, str):
                self._handle = nvml.nvmlDeviceGetHandleByUUID(target)
            else:
                self._handle = nvml.nvmlDeviceGetHandleByIndex(target)
        except Exception as e:
            self.note = f"NVML has no GPU {target} ({e}): GPU energy not measured"
            self._shutdown()
            return
        self.gpu_label = f"GPU {target}"
        try:
            name = nvml.nvmlDeviceGetName(self._handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            self.gpu_label += f" ({name})"
        except Exception:
            pass

        counter_error = None
        if not force_power:
            try:
                nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
                self.mode = "counter"
            except Exception as e:
                counter_error = e
        if self.mode is None:
            try:
                nvml.nvmlDeviceGetPowerUsage(self._handle)
                self.mode = "power"
            except Exception as e:
                why = f"no energy counter ({counter_error}) and no power reading ({e})"
                self.note = f"NVML on {self.gpu_label}: {why}: GPU energy not measured"
                self._shutdown()
                return
        self.available = True
        if self.mode == "counter":
            self.note = f"NVML total-energy counter on {self.gpu_label}"
        else:
            every = f"every {self.sample_interval_s * 1000:.0f} ms" if self.sample_interval_s > 0 else "at begin/read"
            self.note = f"NVML power x time on {self.gpu_label} (power sampled {every}, trapezoid)"

    # -- raw readings
    def _energy_mj(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def _power_w(self) -> float:
        return self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0

    def _sample(self) -> None:
        with self._lock:  # clock and power under one lock keep the samples in time order
            sample = (self._clock(), self._power_w())
            if self._last_sample is not None:
                self._joules += _trapezoid_joules([self._last_sample, sample])
            self._last_sample = sample
            self.n_samples += 1

    def _sampler(self) -> None:
        while not self._stop.wait(self.sample_interval_s):
            try:
                self._sample()
            except Exception:
                pass  # a missed sample only lengthens one trapezoid

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    # -- interface
    def begin(self) -> None:
        if not self.available:
            return
        self._stop_thread()
        sync(self.device)
        self._t0 = self._clock()
        self._last_read = None
        if self.mode == "counter":
            self._start_mj = self._energy_mj()
            return
        with self._lock:
            self._last_sample, self._joules, self.n_samples = None, 0.0, 0
        self._sample()
        self._t0 = self._last_sample[0]  # the integral starts at the first sample
        if self.sample_interval_s > 0:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sampler, name="nvml-power-sampler", daemon=True)
            self._thread.start()

    def read(self, fresh: bool = True) -> EnergyReading:
        if not self.available:
            return EnergyReading(None, self.note)
        if self._t0 is None:
            raise RuntimeError("NvmlMeter.read() before begin()")
        last = self._last_read
        if (not fresh and self.mode == "counter" and last is not None
                and self._clock() - self._t0 - last.seconds < self.min_read_interval_s):
            return last
        sync(self.device)
        try:
            if self.mode == "counter":
                joules = (self._energy_mj() - self._start_mj) / 1000.0
                self._last_read = EnergyReading(joules, self.note, self._clock() - self._t0)
                return self._last_read
            self._sample()
        except Exception as e:  # e.g. NVML shut down, GPU lost
            return EnergyReading(None, f"NVML read failed on {self.gpu_label} ({e})", self._clock() - self._t0)
        with self._lock:
            joules, seconds = self._joules, self._last_sample[0] - self._t0
        return EnergyReading(joules, self.note, seconds)

    def idle_power_watts(self, seconds: float = 1.0) -> float | None:
        """Mean power (W) over `seconds` while we launch nothing, to report separately from
        decoding energy. Power samples where the GPU gives them, else the energy counter
        (coarse: it updates about every 100 ms). None when not available. Blocks `seconds`."""
        if not self.available:
            return None
        sync(self.device)
        step = self.sample_interval_s if self.sample_interval_s > 0 else 0.03
        try:
            samples = [(self._clock(), self._power_w())]
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(step)
                samples.append((self._clock(), self._power_w()))
            span = samples[-1][0] - samples[0][0]
            return _trapezoid_joules(samples) / span if span > 0 else samples[-1][1]
        except Exception:
            if self.mode != "counter":
                return None
        t0, e0 = self._clock(), self._energy_mj()
        time.sleep(seconds)
        t1, e1 = self._clock(), self._energy_mj()
        return (e1 - e0) / 1000.0 / (t1 - t0) if t1 > t0 else None

    def _shutdown(self) -> None:
        if self._inited:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._inited = False

    def close(self) -> None:
        self._stop_thread()
        self._shutdown()


# --------------------------------------------------------------------------- RAPL
class RaplMeter(EnergyMeter):
    """CPU package energy from Linux RAPL: <root>/intel-rapl:N/energy_uj of the package domains.

    Counters wrap at max_energy_range_uj; each read() adds the delta since the previous read,
    so a wrap is handled as long as reads come more often than one wrap period (about an hour
    at typical package power). Counts the whole package, other processes included.
    """

    name = "rapl"

    def __init__(self, root: str | os.PathLike = DEFAULT_RAPL_ROOT):
        self.root = Path(root)
        self.available = False
        self.domains: list[tuple[str, Path, int]] = []  # (name, energy_uj path, max range)
        self._t0: float | None = None
        self._last: list[int] = []
        self._total_uj = 0
        if not self.root.is_dir():
            self.note = f"RAPL not readable ({self.root} absent)"
            return
        dirs = sorted(
            Path(d) for d in glob.glob(str(self.root / "intel-rapl:*")) if Path(d).name.count(":") == 1
        )
        problems = []
        for d in dirs:
            try:
                name = (d / "name").read_text().strip()
            except OSError as e:
                problems.append(f"{d.name}/name: {e.strerror or e}")
                continue
            if not name.startswith("package"):
                continue  # e.g. psys, which overlaps the packages
            try:
                int((d / "energy_uj").read_text())
                max_range = int((d / "max_energy_range_uj").read_text())
            except (OSError, ValueError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                problems.append(f"{d.name}: {why}")
                continue
            self.domains.append((name, d / "energy_uj", max_range))
        if not self.domains:
            detail = "; ".join(problems) if problems else "no package domain"
            self.note = f"RAPL not readable under {self.root} ({detail})"
            return
        self.available = True
        names = "+".join(n for n, _, _ in self.domains)
        self.note = f"RAPL {names} (CPU, whole package incl. other processes)"

    def _raw(self) -> list[int]:
        return [int(path.read_text()) for _, path, _ in self.domains]

    def begin(self) -> None:
        if not self.available:
            return
        self._last = self._raw()
        self._total_uj = 0
        self._t0 = time.monotonic()

    def read(self, fresh: bool = True) -> EnergyReading:
        if not self.available:
            return EnergyReading(None, self.note)
        if self._t0 is None:
            raise RuntimeError("RaplMeter.read() before begin()")
        try:
            now = self._raw()
        except OSError as e:
            return EnergyReading(None, f"RAPL read failed: {e}", time.monotonic() - self._t0)
        for i, ((_, _, max_range), prev, cur) in enumerate(zip(self.domains, self._last, now)):
            delta = cur - prev
            if delta < 0:  # the counter wrapped
                delta += max_range
            self._total_uj += delta
            self._last[i] = cur
        return EnergyReading(self._total_uj / 1e6, self.note, time.monotonic() - self._t0)


# --------------------------------------------------------------------------- factory
def make_meter(
    device: torch.device | str = "cpu",
    prefer: str = "auto",
    *,
    rapl_root: str | os.PathLike = DEFAULT_RAPL_ROOT,
    **nvml_kwargs,
) -> EnergyMeter:
    """A meter for `device`. prefer: "auto" (NVML for cuda, RAPL for cpu), "nvml", "rapl" or
    "none". Whatever cannot measure comes back as an UnavailableMeter carrying the reason."""
    device = torch.device(device)
    if prefer not in ("auto", "nvml", "rapl", "none"):
        raise ValueError(f"prefer must be one of auto, nvml, rapl, none; got {prefer!r}")
    if prefer == "none":
        return UnavailableMeter("energy metering turned off: energy not measured")
    if prefer == "nvml" or (prefer == "auto" and device.type == "cuda"):
        nvml_device = device if device.type == "cuda" else torch.device("cuda", 0)
        meter: EnergyMeter = NvmlMeter(nvml_device, **nvml_kwargs)
        return meter if meter.available else UnavailableMeter(meter.note)
    if prefer == "rapl" or device.type == "cpu":
        meter = RaplMeter(rapl_root)
        if meter.available:
            return meter
        if prefer == "rapl":
            return UnavailableMeter(f"{meter.note}: energy not measured")
        return UnavailableMeter(f"no NVIDIA GPU in use and {meter.note}: energy not measured")
    return UnavailableMeter(f"no energy meter for device type {device.type!r}: energy not measured")


def energy_per_token(joules_window: float | None, tokens: int, seconds: float) -> float | None:
    """Joules per token over one window; None when unmeasured, no tokens, or the window is
    shorter than MIN_WINDOW_SECONDS (counters update about every 100 ms)."""
    if joules_window is None or tokens <= 0 or seconds < MIN_WINDOW_SECONDS:
        return None
    return joules_window / tokens


# --------------------------------------------------------------------------- proxy
PROXY_LABEL = (
    "proxy, not a measurement: bytes of weights read per generated token "
    "(target calls x target bytes + draft calls x draft bytes; MJSD section 4)"
)


def weight_bytes_read(target_calls: int, target_bytes: int, draft_calls: int, draft_bytes: int) -> int:
    """Bytes of weights read: each forward call reads its model's weights once (a batched or
    multi-token pass counts once). Draft-free methods pass draft_bytes=0."""
    for name, v in (("target_calls", target_calls), ("target_bytes", target_bytes),
                    ("draft_calls", draft_calls), ("draft_bytes", draft_bytes)):
        if int(v) != v or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    return int(target_calls) * int(target_bytes) + int(draft_calls) * int(draft_bytes)


def weight_bytes_per_token(
    target_calls: int, target_bytes: int, draft_calls: int, draft_bytes: int, tokens: int
) -> float | None:
    """weight_bytes_read / tokens (see PROXY_LABEL); None for zero tokens."""
    total = weight_bytes_read(target_calls, target_bytes, draft_calls, draft_bytes)
    return None if tokens <= 0 else total / tokens
