"""A real full disk: a tiny tmpfs mounted for one test (root only; the test skips, saying why, where mounting is
refused) and filled to its last page, so every write edsb makes meets the kernel's own ENOSPC."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PAGE = 4096  # tmpfs hands out space a page at a time


@contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` for the block's duration."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill ({mounted.stderr.strip() or 'mount refused'})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill `disk` with one file until the kernel says ENOSPC, then give back `leave` bytes; the file's path."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * PAGE)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def leftovers(root: Path) -> list[Path]:
    """Temporary files a write left behind under `root`."""
    return sorted(root.rglob("*.tmp"))
