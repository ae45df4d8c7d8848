"""A finished run's records kept packed (app/packed.py): they read back equal to the records, as
the list they replace, at a fraction of the bytes, and the shared cache of unpacked runs is bounded."""

import pytest

from app import packed
from app.footprint import deep_bytes
from app.packed import PackedRecords, pack
from decoding.run.runner import generate
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig


@pytest.fixture(scope="module")
def records(tiny_pair):
    target, draft = tiny_pair
    config = RunConfig(method="speculative", max_new_tokens=24, sampling=SamplingConfig(temperature=0.8), gamma=4,
                       seed=2, stop_at_eos=False)
    return generate(target, draft, "the cat sat on the mat", config)[0]


def test_packed_records_read_back_as_the_list_they_replace(records):
    kept = pack(records)
    assert isinstance(kept, PackedRecords) and len(kept) == len(records) and kept
    packed.forget_unpacked()  # read from the bytes, not from the cache filled when packing
    assert list(kept) == records and kept == records
    assert kept[0] == records[0] and kept[-1] == records[-1] and kept[3:7] == records[3:7]
    assert [r.iteration for r in kept] == [r.iteration for r in records]
    assert pack(kept) is kept and pack([]) == []


def test_an_idle_packed_run_holds_a_fraction_of_its_records(records):
    kept = pack(records)
    packed.forget_unpacked()
    assert kept.nbytes < deep_bytes(records) / 5
    assert deep_bytes(kept) < kept.nbytes + 1024


def test_the_cache_of_unpacked_runs_is_bounded_and_forgets_dropped_runs(records, monkeypatch):
    import gc

    monkeypatch.setattr(packed, "CACHED_RECORDS", 3 * len(records))
    packed.forget_unpacked()
    runs = [pack(records) for _ in range(6)]
    for run in runs:
        assert len(run.unpacked()) == len(run)
    assert packed.cached_records() == 3 * len(records)  # the three read last
    del runs[-1], run
    gc.collect()
    assert packed.cached_records() == 2 * len(records)  # a session that drops its run frees its cached records
    runs.clear()
    gc.collect()
    assert packed.cached_records() == 0
