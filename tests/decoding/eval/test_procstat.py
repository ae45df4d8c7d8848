"""decoding/eval/procstat.py: the allocator settings the app's process uses."""

import subprocess
import sys
import textwrap

import pytest

from decoding.eval import procstat

# A child process starts 8 threads that each allocate through malloc, then prints glibc's malloc_info
# (an XML report with one <heap nr=...> element per heap) and the count of heaps it lists.
CHILD = textwrap.dedent("""
    import ctypes, re, sys, threading, os, tempfile
    from decoding.eval import procstat
    limit = int(sys.argv[1])
    if limit:
        assert procstat.limit_heap_arenas(limit)
    libc = procstat._libc()
    libc.malloc.restype = ctypes.c_void_p
    start = threading.Barrier(8)
    def grab():
        start.wait()
        libc.malloc(4096)  # a block from this thread's heap (never freed: the heap stays listed)
    threads = [threading.Thread(target=grab) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    path = tempfile.mktemp()
    libc.fopen.restype = ctypes.c_void_p
    f = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(f))
    libc.fclose(ctypes.c_void_p(f))
    print(len(re.findall(r'<heap nr="', open(path).read())))
    os.unlink(path)
""")


def _heaps(limit: int) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, str(limit)], capture_output=True, text=True, timeout=60,
                         check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(procstat._libc() is None, reason="glibc only")
def test_limiting_the_heaps_keeps_threads_on_that_many():
    assert _heaps(0) > 2  # by default each new thread that allocates gets a heap of its own
    assert _heaps(2) <= 2


def test_a_limit_below_one_is_refused():
    assert procstat.limit_heap_arenas(0) is False
