"""A process's memory figures from Linux's /proc/<pid>/status (VmRSS, VmHWM, ...), read by the
benchmark's memory children, the classroom load script and the trace-memory script, and
`release_free_memory`, which the app calls after a run, and `limit_heap_arenas`, which it calls at
start-up. No torch here, so a load-test client can
import it cheaply."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def _libc():
    """glibc, for malloc_trim; None where the C library is another (musl, macOS, Windows)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


# glibc's mallopt parameter for the most heaps (arenas) the allocator keeps (malloc.h's M_ARENA_MAX)
M_ARENA_MAX = -8


def limit_heap_arenas(arenas: int) -> bool:
    """Let glibc keep at most `arenas` heaps; False where there is no glibc or it refused.

    glibc gives a thread that allocates while another holds a heap's lock a heap of its own, up to
    eight per core. Memory freed in a heap stays in it for that heap's next allocations, so a server
    whose runs and sessions move between many worker threads (Gradio's pool has 40) keeps a little
    unused memory in each of many heaps, and its resident memory creeps up with every burst of new
    visitors. Fewer heaps share their free memory; the threads contend for them only on small
    allocations (tensors' storage of more than a few hundred kB is mapped on its own). Heaps created
    before the call stay, so call it before the server starts its threads."""
    libc = _libc()
    if libc is None or arenas < 1:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the system (glibc's malloc_trim(0)); False where there is
    no glibc. A finished run frees its KV caches and activations, but glibc keeps the freed memory
    of its heaps (one per thread that allocated) for reuse, so without this the resident memory of
    a server whose runs move between threads only grows. Takes a few milliseconds."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def status_kb(field_name: str, pid: int | str = "self") -> int | None:
    """One kB field of /proc/<pid>/status, or None where it cannot be read (not Linux, process gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def rss_mb(pid: int | str | None = "self") -> float | None:
    """Resident memory of a process in MB (None for no pid, or when it cannot be read)."""
    kb = status_kb("VmRSS", pid) if pid is not None else None
    return None if kb is None else kb / 1024
