"""The run directory's `results.jsonl`: append-only, one fsynced line per finished run, safe to resume after kill -9.

A line is either whole (ends with a newline and parses) or the torn tail of a killed write; the loader drops the
tail. Records whose run did not complete (transport failure) are dropped when the directory is reopened, so the next
pass retries them and the file never holds a key twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from edsb.errors import EdsbError

RESULTS_FILE = "results.jsonl"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Whole records in file order and the byte length of the whole-line prefix (a torn tail lies beyond it).

    Only a last line without its newline is torn: every write ends with one. Any other unreadable line is
    corruption, which is refused rather than repaired.
    """
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    good = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise EdsbError(f"{path}: corrupt line {len(records) + 1}; refusing to touch this file") from None
        if not isinstance(record, dict) or "key" not in record:
            raise EdsbError(f"{path}: line {len(records) + 1} is not a run record; refusing to touch this file")
        records.append(record)
        good += len(line)
    return records, good


def is_complete(record: dict[str, Any]) -> bool:
    return record.get("status") != "incomplete"


class ResultStore:
    """Owns results.jsonl for one run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self._handle = None

    def open(self) -> dict[str, dict[str, Any]]:
        """Repair the file (torn tail, incomplete runs) and return the finished records by key id."""
        records, good = read_records(self.path)
        finished = {r["key"]: r for r in records if is_complete(r)}
        if good != (self.path.stat().st_size if self.path.exists() else 0) or len(finished) != len(records):
            self._rewrite(list(finished.values()))
        self._handle = self.path.open("ab")
        return finished

    def _rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        temporary = self.path.with_suffix(".jsonl.tmp")
        with temporary.open("wb") as handle:
            for record in records:
                handle.write(encode(record))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        _fsync_dir(self.path.parent)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as a single write of a whole line, then flush and fsync before returning."""
        assert self._handle is not None, "open() first"
        self._handle.write(encode(record))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def encode(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def latest_by_key(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per run key, the last one written."""
    return list({record["key"]: record for record in records}.values())


def load_results(run_dir: Path) -> list[dict[str, Any]]:
    """Finished records of a run directory (read-only; last record per key wins)."""
    return latest_by_key(read_records(Path(run_dir) / RESULTS_FILE)[0])
