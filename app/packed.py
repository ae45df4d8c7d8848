"""A finished run's records kept compactly: what an idle session holds of the run it shows.

A record holds the top-k lists of p and q at every draft position (the bars the explainer shows),
its draft tree and its residual: as Python objects about 20 kB per iteration (a run of 32 tokens of
the default pair, 17 iterations: 330 kB). `PackedRecords` keeps them as the zlib-compressed JSON of
their trace form (`IterationRecord.to_dict`, the format of a saved trace: 23 kB for that run) and
reads like the list it replaces (len, indexing, slices, iteration). Reading unpacks the whole run
once (about 10 ms for that run) into a small cache shared by all sessions (`CACHED_RUNS` runs,
least recently read out first), so the panels of a session that is being looked at read plain
records, and an idle one holds only its bytes. Packing a run the session has just decoded puts
its records in that cache as they are: the first view after a run unpacks nothing.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence

from decoding.trace import IterationRecord

CACHED_RUNS = 16  # unpacked runs kept at once, over all sessions

_cache: OrderedDict[int, tuple["PackedRecords", tuple[IterationRecord, ...]]] = OrderedDict()
_lock = threading.Lock()


class PackedRecords(Sequence):
    """A read-only sequence of IterationRecord stored as compressed trace JSON (see the module doc)."""

    __slots__ = ("_blob", "_length", "__weakref__")

    def __init__(self, records: Sequence[IterationRecord]):
        records = tuple(records)
        text = json.dumps([r.to_dict() for r in records], ensure_ascii=False, separators=(",", ":"))
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
            if hit is not None and hit[0] is self:
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
    with _lock:
        _cache[id(packed)] = (packed, records)
        _cache.move_to_end(id(packed))
        while len(_cache) > CACHED_RUNS:
            _cache.popitem(last=False)


def pack(records) -> PackedRecords | list:
    """`records` packed (a PackedRecords as it is; an empty list stays a list)."""
    if isinstance(records, PackedRecords) or not records:
        return records
    return PackedRecords(records)


def forget_unpacked() -> None:
    """Empty the shared cache of unpacked runs (tests measure a session without it)."""
    with _lock:
        _cache.clear()
