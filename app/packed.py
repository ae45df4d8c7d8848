"""A finished run's records kept compactly: what an idle session holds of the run it shows.

A record holds the top-k lists of p and q at every draft position (the bars the explainer shows),
its draft tree and its residual: as Python objects about 20 kB per iteration (a run of 32 tokens of
the default pair, 17 iterations: 330 kB). `PackedRecords` keeps them as the zlib-compressed JSON of
their trace form (the fields of `IterationRecord`, as a saved trace holds them: 23 kB for that run)
and reads like the list it replaces (len, indexing, slices, iteration). Reading unpacks the whole run
once (about 10 ms for that run; 0.6 s for a trace file at the upload limit) into a cache shared by
all sessions and bounded by its records (`CACHED_RECORDS`, least recently read out first; a run
leaves it when its session drops it), so the panels of a session that is being looked at read
plain records, and an idle one holds only its bytes. Packing a run puts its records in that cache
as they are: the first view after a run unpacks nothing.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

from decoding.trace.record import IterationRecord

CACHED_RECORDS = 4096  # unpacked records kept at once, over all sessions (a class's runs; one trace at the limit)

# id(packed) -> (weak reference to it, its records)
_cache: OrderedDict[int, tuple[weakref.ref, tuple[IterationRecord, ...]]] = OrderedDict()
_lock = threading.Lock()


@lru_cache(maxsize=None)
def _field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain(value):
    """json.dumps' fallback: a dataclass of the trace (a record, a candidate, ...) as its fields (what
    IterationRecord.to_dict gives, without dataclasses.asdict's deep copy: 2.4x faster)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: getattr(value, name) for name in _field_names(type(value))}
    raise TypeError(f"cannot pack {type(value).__name__}")


class PackedRecords(Sequence):
    """A read-only sequence of IterationRecord stored as compressed trace JSON (see the module doc)."""

    __slots__ = ("_blob", "_length", "__weakref__")

    def __init__(self, records: Sequence[IterationRecord]):
        records = tuple(records)
        text = json.dumps(records, default=_plain, ensure_ascii=False, separators=(",", ":"))
        self._blob = zlib.compress(text.encode("utf-8"), 6)
        self._length = len(records)
        _remember(self, records)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed form."""
        return len(self._blob)

    def unpacked(self) -> tuple[IterationRecord, ...]:
        """The records as objects (from the shared cache, or unpacked into it)."""
        with _lock:
            hit = _cache.get(id(self))
            if hit is not None and hit[0]() is self:
                _cache.move_to_end(id(self))
                return hit[1]
        data = json.loads(zlib.decompress(self._blob).decode("utf-8"))
        records = tuple(IterationRecord.from_dict(d) for d in data)
        _remember(self, records)
        return records

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        found = self.unpacked()[index]
        return list(found) if isinstance(index, slice) else found

    def __iter__(self):
        return iter(self.unpacked())

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None


def _remember(packed: PackedRecords, records: tuple[IterationRecord, ...]) -> None:
    """Cache `records` as `packed`'s, dropping the least recently read runs beyond CACHED_RECORDS
    (the newest always stays) and the entry itself once `packed` is gone."""
    key = id(packed)

    def gone(_ref, key=key) -> None:
        with _lock:
            entry = _cache.get(key)
            if entry is not None and entry[0]() is None:
                del _cache[key]

    with _lock:
        _cache[key] = (weakref.ref(packed, gone), records)
        _cache.move_to_end(key)
        held = sum(len(entry[1]) for entry in _cache.values())
        while held > CACHED_RECORDS and len(_cache) > 1:
            _, (_, dropped) = _cache.popitem(last=False)
            held -= len(dropped)


def pack(records) -> PackedRecords | list:
    """`records` packed (a PackedRecords as it is; an empty list stays a list)."""
    if isinstance(records, PackedRecords) or not records:
        return records
    return PackedRecords(records)


def cached_records() -> int:
    """Unpacked records the shared cache holds now."""
    with _lock:
        return sum(len(entry[1]) for entry in _cache.values())


def forget_unpacked() -> None:
    """Empty the shared cache of unpacked runs (tests measure a session without it)."""
    with _lock:
        _cache.clear()
