"""A process's memory figures from Linux's /proc/<pid>/status (VmRSS, VmHWM, ...), read by the
benchmark's memory children, the classroom load script and the trace-memory script. No torch here,
so a load-test client can import it cheaply."""

from __future__ import annotations

from pathlib import Path


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
