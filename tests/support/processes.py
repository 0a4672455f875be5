"""The processes a test started, read from /proc (Linux): a process's descendants, how much memory one holds, and
whether any of them still runs. A process is named by its id and start time, so that an id the kernel hands to a
new process is never mistaken for the old one; a zombie counts as gone (it runs nothing and holds no memory)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

Process = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = int(fields[1])
    return found


def descendants(root: int) -> set[Process]:
    """Every process below `root` (children, their children, ...), as they are now."""
    parents = _parents()
    below: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return {found for pid in below if (found := process(pid)) is not None}


def process(pid: int) -> Process | None:
    """The process of this id as it is now; None if there is none."""
    fields = _stat(pid)
    return None if fields is None else (pid, int(fields[19]))


def running(processes: set[Process]) -> set[Process]:
    """Those of `processes` that still exist and are not zombies."""
    left = set()
    for pid, start in processes:
        fields = _stat(pid)
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[19]) == start:
            left.add((pid, start))
    return left


def resident_bytes(pid: int) -> int:
    """The memory the process holds now (VmRSS); 0 once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_ticks(pid: int) -> int:
    """The CPU time the process has used so far (user and system, in clock ticks); 0 once it is gone."""
    fields = _stat(pid)
    return 0 if fields is None else int(fields[11]) + int(fields[12])


def nice(pid: int) -> int | None:
    """The process's nice value; None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[16])


def poll(condition: Callable[[], bool], timeout: float, every: float = 0.005) -> float | None:
    """Seconds until `condition()` held, or None if it did not within `timeout`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            return None
        time.sleep(every)
    return time.monotonic() - started
