"""What every method shares (`decoding/methods/base.py`): end-of-sequence stops a run and is included; a timing
run reads the energy meter once."""

import pytest

from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode

GREEDY = SamplingConfig(temperature=0.0)
PROMPT = "hello world, the cat"


def test_eos_stops_and_is_included(tiny_pair):
    target, draft = tiny_pair
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    # find what greedy produces, then declare its 5th token an end-of-sequence token
    base = RunConfig(method="autoregressive", max_new_tokens=12, sampling=GREEDY, stop_at_eos=False)
    free = [t.token_id for r in decode(target, None, prompt_ids, base) for t in r.emitted]
    stop_id = free[4]
    first = free.index(stop_id)
    original = target.eos_token_ids
    target.eos_token_ids = lambda chat: [stop_id]
    try:
        for method in ("autoregressive", "speculative"):
            config = RunConfig(method=method, max_new_tokens=12, sampling=GREEDY, gamma=4)
            records = list(decode(target, draft, prompt_ids, config))
            ids = [t.token_id for r in records for t in r.emitted]
            assert ids == free[: first + 1]
            assert records[-1].finished and records[-1].stop_reason == "eos"
    finally:
        target.eos_token_ids = original


class _CountingMeter:
    """An energy meter that counts its readings: 1 J per reading."""

    def __init__(self):
        self.reads, self.fresh = 0, []

    def begin(self):
        self.reads, self.fresh = 0, []

    def read(self, fresh=True):
        from decoding.eval.energy import EnergyReading

        self.reads += 1
        self.fresh.append(fresh)
        return EnergyReading(float(self.reads), "counting meter")


@pytest.mark.parametrize("lean", [False, True])
def test_a_timing_run_reads_the_meter_once_at_its_end(tiny_pair, lean):
    """A lean run (the benchmark's timing runs) reads the meter at its last iteration only, since a reading can
    cost as much as a step; a shown run reads it every iteration (the live energy chart)."""
    from decoding.run.runner import decode

    target, draft = tiny_pair
    meter = _CountingMeter()
    config = RunConfig(method="speculative", max_new_tokens=10, gamma=2, lean=lean, stop_at_eos=False,
                       sampling=SamplingConfig(temperature=0.0))
    records = list(decode(target, draft, target.encode_prompt("hello", chat=False), config, meter))
    assert len(records) > 1 and records[-1].finished
    assert meter.reads == (1 if lean else len(records))
    assert records[-1].energy_joules == meter.reads
    assert all(r.energy_joules is None for r in records[:-1]) if lean else records[0].energy_joules == 1.0
    # only the last reading must be new; the others may repeat the meter's last one (NVML's counter is slow)
    assert meter.fresh == ([True] if lean else [False] * (len(records) - 1) + [True])
