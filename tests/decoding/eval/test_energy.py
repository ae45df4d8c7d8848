"""Energy meters: the real machine as it is, a fake RAPL sysfs tree, a fake pynvml module."""

import glob
import pathlib
import sys
import time
import types

import pytest
import torch

from decoding.eval import energy as E


# --------------------------------------------------------------------------- this machine
def _rapl_package_readable(root="/sys/class/powercap") -> bool:
    for d in glob.glob(f"{root}/intel-rapl:*"):
        if pathlib.Path(d).name.count(":") != 1:
            continue
        try:
            if pathlib.Path(d, "name").read_text().startswith("package"):
                int(pathlib.Path(d, "energy_uj").read_text())
                return True
        except (OSError, ValueError):
            continue
    return False


def test_cpu_meter_on_this_machine_reports_only_what_is_true():
    meter = E.make_meter("cpu")
    meter.begin()
    time.sleep(0.05)
    reading = meter.read()
    meter.close()
    if _rapl_package_readable():
        assert meter.available and isinstance(meter, E.RaplMeter)
        assert isinstance(reading.joules, float) and reading.joules >= 0
        assert reading.note.startswith("RAPL package")
    else:
        assert not meter.available and isinstance(meter, E.UnavailableMeter)
        assert reading.joules is None
        assert "RAPL" in reading.note and "not measured" in reading.note


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cuda_meter_without_gpu_is_unavailable_with_reason():
    meter = E.make_meter("cuda:0")
    assert isinstance(meter, E.UnavailableMeter)
    meter.begin()
    r = meter.read()
    assert r.joules is None and "not measured" in r.note and len(r.note) > 20


def test_make_meter_options():
    assert E.make_meter("cpu", prefer="none").read().joules is None
    assert "not measured" in E.make_meter("mps").note
    with pytest.raises(ValueError, match="prefer"):
        E.make_meter("cpu", prefer="gpu")


# --------------------------------------------------------------------------- RAPL (fake sysfs)
def _domain(root, name, label, energy, max_range=1_000_000):
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    return d


def _set(d, energy):
    (d / "energy_uj").write_text(f"{energy}\n")


def test_rapl_sums_packages_and_handles_wraparound(tmp_path):
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 999_900)
    core = _domain(tmp_path, "intel-rapl:0:0", "core", 5)  # subdomain: inside package-0
    p1 = _domain(tmp_path, "intel-rapl:1", "package-1", 10_000)
    psys = _domain(tmp_path, "intel-rapl:2", "psys", 7)  # overlaps the packages
    meter = E.make_meter("cpu", rapl_root=tmp_path)
    assert isinstance(meter, E.RaplMeter) and meter.available
    assert meter.note.startswith("RAPL package-0+package-1")
    meter.begin()
    _set(p0, 50)  # wrapped: 100 to the top of the range + 50 after it
    _set(p1, 12_000)  # +2000
    _set(core, 999)
    _set(psys, 999_999)
    r = meter.read()
    assert r.joules == pytest.approx((150 + 2000) / 1e6)
    assert r.seconds >= 0
    _set(p0, 1_050)  # +1000
    assert meter.read().joules == pytest.approx((150 + 2000 + 1000) / 1e6)  # cumulative
    meter.begin()  # a new window starts from zero
    assert meter.read().joules == 0.0


def test_rapl_absent_and_unreadable(tmp_path, monkeypatch):
    missing = E.make_meter("cpu", rapl_root=tmp_path / "nope")
    assert isinstance(missing, E.UnavailableMeter) and "absent" in missing.note
    assert missing.read().joules is None

    empty = E.RaplMeter(tmp_path)
    assert not empty.available and "no package domain" in empty.note

    _domain(tmp_path, "intel-rapl:0", "package-0", 123)
    real_read_text = pathlib.Path.read_text

    def deny(self, *a, **k):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *a, **k)

    monkeypatch.setattr(pathlib.Path, "read_text", deny)
    meter = E.make_meter("cpu", rapl_root=tmp_path)
    assert isinstance(meter, E.UnavailableMeter)
    assert "Permission denied" in meter.note and "not measured" in meter.note
    raw = E.RaplMeter(tmp_path)
    raw.begin()  # no-op, never a number
    assert raw.read().joules is None


# --------------------------------------------------------------------------- NVML (fake pynvml)
class FakeNVMLError(Exception):
    pass


def fake_pynvml(log, *, counter=True, power=True, init_ok=True, clock=time.monotonic):
    """A stand-in for the pynvml module; `state` holds the counter (mJ) and power (mW)."""
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.state = {"mj": 1_000_000, "mw": 100_000, "power_fn": None, "energy_fn": None}

    def nvmlInit():
        log.append("init")
        if not init_ok:
            raise FakeNVMLError("Driver Not Loaded")

    def energy(handle):
        log.append("energy")
        if not counter:
            raise FakeNVMLError("Not Supported")
        fn = m.state["energy_fn"]
        return fn() if fn else m.state["mj"]

    def power_usage(handle):
        log.append("power")
        if not power:
            raise FakeNVMLError("Not Supported")
        fn = m.state["power_fn"]
        return fn() if fn else m.state["mw"]

    m.nvmlInit = nvmlInit
    m.nvmlShutdown = lambda: log.append("shutdown")
    m.nvmlDeviceGetHandleByIndex = lambda i: log.append(f"index {i}") or ("handle", i)
    m.nvmlDeviceGetHandleByUUID = lambda u: log.append(f"uuid {u}") or ("handle", u)
    m.nvmlDeviceGetName = lambda h: b"Fake GPU"
    m.nvmlDeviceGetTotalEnergyConsumption = energy
    m.nvmlDeviceGetPowerUsage = power_usage
    return m


@pytest.fixture
def nvml_env(monkeypatch):
    """Pretend CUDA is there; record every synchronize in the same log as the NVML calls."""
    log = []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: log.append("sync"))

    def install(**kw):
        mod = fake_pynvml(log, **kw)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod

    return log, install


def test_nvml_counter_path(nvml_env):
    log, install = nvml_env
    fake = install()
    meter = E.make_meter("cuda:0")
    assert isinstance(meter, E.NvmlMeter) and meter.mode == "counter"
    assert meter.note == "NVML total-energy counter on GPU 0 (Fake GPU)"
    log.clear()
    meter.begin()
    fake.state["mj"] += 2_500
    r = meter.read()
    assert r.joules == pytest.approx(2.5) and r.note == meter.note
    # The device is synchronized before each counter read.
    assert log == ["sync", "energy", "sync", "energy"]
    fake.state["mj"] += 500
    assert meter.read().joules == pytest.approx(3.0)  # cumulative since begin
    meter.close()
    assert log[-1] == "shutdown"
    fake.state["energy_fn"] = lambda: (_ for _ in ()).throw(FakeNVMLError("Uninitialized"))
    r = meter.read()  # a failed read is None with the reason, never a number
    assert r.joules is None and "Uninitialized" in r.note


def test_nvml_counter_is_read_at_most_every_min_interval_unless_fresh(nvml_env):
    """read(fresh=False) within min_read_interval_s of the counter's last read returns that reading (joules and
    seconds of the same moment) without asking NVML; later, or with fresh=True, the counter is read."""
    log, install = nvml_env
    fake = install()
    now = [0.0]
    meter = E.NvmlMeter("cuda:0", clock=lambda: now[0], min_read_interval_s=0.1)
    meter.begin()
    assert meter.read(fresh=False).joules == 0.0  # no reading yet in this window: the counter is read
    log.clear()
    fake.state["mj"] += 1_000
    now[0] = 0.05
    again = meter.read(fresh=False)
    assert log == [] and again.joules == 0.0 and again.seconds == 0.0
    assert meter.read().joules == pytest.approx(1.0) and log == ["sync", "energy"]  # fresh: always read
    now[0] = 0.2
    fake.state["mj"] += 500
    late = meter.read(fresh=False)
    assert late.joules == pytest.approx(1.5) and late.seconds == pytest.approx(0.2)
    meter.begin()  # a new window forgets the last reading
    now[0] = 0.21
    log.clear()
    first = meter.read(fresh=False)
    assert log == ["sync", "energy"] and first.joules == 0.0 and first.seconds == pytest.approx(0.01)
    meter.close()


def test_nvml_power_integration_with_fake_clock(nvml_env):
    log, install = nvml_env
    now = [0.0]
    fake = install(counter=False)
    meter = E.NvmlMeter("cuda:0", sample_interval_s=0, clock=lambda: now[0])
    assert meter.available and meter.mode == "power"
    assert meter.note.startswith("NVML power x time on GPU 0")
    meter.begin()  # t=0, 100 W
    now[0], fake.state["mw"] = 2.0, 200_000
    r = meter.read()  # trapezoid: 2 s * (100 + 200) / 2
    assert r.joules == pytest.approx(300.0) and r.seconds == pytest.approx(2.0)
    now[0] = 3.0
    assert meter.read().joules == pytest.approx(500.0)
    assert log.count("sync") == 3  # begin + two reads
    meter.close()


def test_nvml_power_sampling_thread(nvml_env):
    _, install = nvml_env
    install(counter=False).state["mw"] = 50_000  # 50 W, constant
    meter = E.make_meter("cuda", sample_interval_s=0.01)
    assert isinstance(meter, E.NvmlMeter) and meter.mode == "power"
    meter.begin()
    time.sleep(0.2)
    r = meter.read()
    meter.close()
    assert meter.n_samples > 3  # the background thread sampled in between
    assert r.joules == pytest.approx(50.0 * r.seconds, rel=1e-9)
    assert 0.15 < r.seconds < 2.0
    assert meter._thread is None  # close() stopped it


def test_nvml_idle_power(nvml_env):
    _, install = nvml_env
    install(counter=False).state["mw"] = 42_000
    meter = E.NvmlMeter("cuda:0", sample_interval_s=0.01)
    assert meter.idle_power_watts(0.05) == pytest.approx(42.0)
    meter.close()
    # Counter only: mean power from the energy delta (30 W as a function of time).
    fake = install(power=False)
    fake.state["energy_fn"] = lambda: int(30.0 * time.monotonic() * 1000)
    meter = E.NvmlMeter("cuda:0")
    assert meter.mode == "counter"
    assert meter.idle_power_watts(0.1) == pytest.approx(30.0, rel=0.05)


def test_nvml_unavailable_reasons(nvml_env):
    log, install = nvml_env
    install(counter=False, power=False)
    meter = E.make_meter("cuda:0")
    assert isinstance(meter, E.UnavailableMeter)
    assert "no energy counter" in meter.note and "no power reading" in meter.note
    assert log[-1] == "shutdown"
    install(init_ok=False)
    meter = E.make_meter("cuda:0")
    assert isinstance(meter, E.UnavailableMeter) and "Driver Not Loaded" in meter.note
    meter.begin()
    assert meter.read().joules is None


def test_nvml_honours_cuda_visible_devices(nvml_env, monkeypatch):
    log, install = nvml_env
    install()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert E.NvmlMeter("cuda:1").available and "index 5" in log
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert E.NvmlMeter("cuda:0").available and "uuid GPU-abc" in log


# --------------------------------------------------------------------------- per token + proxy
def test_energy_per_token_needs_a_one_second_window():
    assert E.energy_per_token(10.0, 5, 0.99) is None
    assert E.energy_per_token(10.0, 5, 1.0) == pytest.approx(2.0)
    assert E.energy_per_token(None, 5, 3.0) is None
    assert E.energy_per_token(10.0, 0, 3.0) is None


def test_weight_bytes_proxy():
    # 10 target calls x 1000 B + 40 draft calls x 10 B
    assert E.weight_bytes_read(10, 1000, 40, 10) == 10_400
    assert E.weight_bytes_read(7, 1000, 0, 0) == 7000
    assert E.weight_bytes_per_token(10, 1000, 40, 10, tokens=25) == pytest.approx(416.0)
    assert E.weight_bytes_per_token(10, 1000, 40, 10, tokens=0) is None
    with pytest.raises(ValueError, match="draft_calls"):
        E.weight_bytes_read(1, 1, -1, 1)
    assert "proxy" in E.PROXY_LABEL and "not a measurement" in E.PROXY_LABEL


def test_model_weight_bytes_counts_tied_weights_once():
    lin = torch.nn.Linear(4, 3)  # 12 + 3 fp32
    assert E.model_weight_bytes(lin) == 15 * 4
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    tied = torch.nn.ModuleDict({"emb": emb, "head": head}).to(torch.float16)
    assert E.model_weight_bytes(tied) == 40 * 2
