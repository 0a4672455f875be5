"""The run directory: `config.json`, the append-only `results.jsonl`, `summary.json` and `results.json`. Everything
that reads or writes those files lives here, so the runner and the report agree on them without importing each other.

`results.jsonl` holds one line per finished run and is safe to resume after kill -9: a line is either whole (ends
with a newline and parses) or the torn tail of a killed write, which the loader drops. Lines of runs that finish
close together are written and fsynced as one batch in the store's own thread (`edsb.group_commit`), so the event
loop never waits on the disk and a sweep pays one fsync per batch, not per run; a run whose line had not reached the
disk when the process died is simply run again on resume. A run's transcript lines are appended when it is
committed, before its line, but not fsynced: a kill -9 loses no written byte (the kernel holds them), and an fsync
per run costs more CPU than the rest of a run's bookkeeping; only an OS crash could leave a transcript shorter than
its runs, which a replay then reports as a missing answer. Records whose run did not complete are dropped when the
directory is reopened for writing, so the next pass retries them and the file never holds a key twice.

One edsb process at a time writes a run directory (`RunDirLock`, an flock on `.edsb-lock`): a second `edsb run` on it
stops with one line before it writes or sends anything. The kernel drops the lock with its process, so a kill -9
never leaves a directory locked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from pydantic_core import from_json

from edsb.errors import EdsbError, UsageError, validation_message
from edsb.group_commit import GroupCommit
from edsb.results.migrate import current_config, current_result
from edsb.results.record import RunResult

RESULTS_FILE = "results.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
RESULTS_DOCUMENT_FILE = "results.json"  # the run card and every cell (docs/results-schema.md)
LOCK_FILE = ".edsb-lock"  # flocked while an edsb process writes the directory (`RunDirLock`)
BATCHES_DIR = "batches"  # one record per provider batch of `edsb run --batch` (`results.batches`)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, a full quota


class DiskFullError(EdsbError):
    """A file edsb writes found the disk full. Every write here is whole or absent (a failed write removes its
    temporary file, a failed batch of result lines is cut off), so what was written before stays, and the same
    command resumes."""


def disk_full(path: Path | str) -> DiskFullError:
    """The one line a full disk gets: the file, that nothing is lost, and what to do."""
    return DiskFullError(
        f"{path}: no space left on device; nothing already written is lost: free some space and run the same "
        "command again to go on from where it stopped"
    )


@contextlib.contextmanager
def writing(path: Path, temporary: Path | None = None) -> Iterator[None]:
    """Around a write of `path`: any failure removes `temporary` (never left behind), and a full disk becomes
    `disk_full(path)`."""
    try:
        yield
    except BaseException as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            raise disk_full(path) from None
        raise


def read_results(path: Path) -> tuple[list[RunResult], int]:
    """Whole records in file order and the byte length of the whole-line prefix (a torn tail lies beyond it).

    Only a last line without its newline is torn: every write ends with one. Any other unreadable line is
    corruption, which is refused rather than repaired.
    """
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    results: list[RunResult] = []
    good = 0
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        if not line.endswith(b"\n"):
            break
        try:
            raw = from_json(line)  # pydantic-core's parser, several times json.loads on bytes
        except ValueError:
            raise EdsbError(f"{path}: corrupt line {number}; refusing to touch this file") from None
        if not isinstance(raw, dict) or "key" not in raw:
            raise EdsbError(f"{path}: line {number} is not a run record; refusing to touch this file")
        try:
            results.append(RunResult.model_validate(current_result(raw, f"{path}: line {number}")))
        except ValidationError as exc:
            raise EdsbError(f"{path}: record {number}: {validation_message(exc)}") from None
        good += len(line)
    return results, good


def latest_by_key(results: Iterable[RunResult]) -> list[RunResult]:
    """One record per run key, the last one written."""
    return list({result.key: result for result in results}.values())


def load_results(run_dir: Path) -> list[RunResult]:
    """The records of a run directory, last one per key (read-only; incomplete runs included)."""
    return latest_by_key(read_results(Path(run_dir) / RESULTS_FILE)[0])


def open_appending(path: Path) -> int:
    """A descriptor that appends to `path` (created with its folder as needed), without fsync (see ResultStore). A
    last line without its newline is the torn tail of a killed write: it is cut first, so new lines never run on
    from it."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.ftruncate(fd, os.pread(fd, size, 0).rfind(b"\n") + 1)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunDirBusyError(EdsbError):
    """Another process holds the run directory's lock."""


class RunDirLock:
    """The run directory's lock, held while this process writes it. Taken again in the same process (the passes of
    `edsb run --batch` each open the results store), it only counts: one flock per process and directory."""

    _held: ClassVar[dict[str, tuple[int, int]]] = {}  # resolved directory -> (descriptor, depth)

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._key = str(self.run_dir.resolve())
        self._taken = False

    def acquire(self) -> None:
        if self._taken:
            return
        held = self._held.get(self._key)
        if held is None:
            fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise RunDirBusyError(
                    f"{self.run_dir}: another edsb process is running in this run directory; let it finish or stop "
                    "it, then run the same command"
                ) from None
            held = (fd, 0)
        self._held[self._key] = (held[0], held[1] + 1)
        self._taken = True

    def release(self) -> None:
        if not self._taken:
            return
        self._taken = False
        fd, depth = self._held.pop(self._key)
        if depth > 1:
            self._held[self._key] = (fd, depth - 1)
        else:
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ResultStore:
    """Owns results.jsonl for one run directory while a run writes to it.

    `before_line(result)`, if given, writes what else belongs to the run (its transcript) when the run is committed,
    before its record joins a batch (without fsync, see the module docstring)."""

    def __init__(self, run_dir: Path, before_line: Callable[[RunResult], None] | None = None) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self._before_line = before_line
        self._fd: int | None = None
        self._lock = RunDirLock(Path(run_dir))
        self._lines = GroupCommit(self._write_batch, thread_name="edsb-results")

    def open(self) -> dict[str, RunResult]:
        """Take the directory's lock, repair the file (torn tail, incomplete runs) and return the finished records by
        key id."""
        self._lock.acquire()
        try:
            results, good = read_results(self.path)
            finished = {r.key: r for r in results if r.is_judged}
            if good != (self.path.stat().st_size if self.path.exists() else 0) or len(finished) != len(results):
                self._rewrite(finished.values())
            with writing(self.path):
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except BaseException:
            self._lock.release()
            raise
        return finished

    def _rewrite(self, results: Iterable[RunResult]) -> None:
        temporary = self.path.with_suffix(".jsonl.tmp")
        with writing(self.path, temporary):
            with temporary.open("wb") as handle:
                for result in results:
                    handle.write(result.to_line())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        _fsync_dir(self.path.parent)

    @property
    def fsyncs(self) -> int:
        """Batches made durable (for benchmarks and tests)."""
        return self._lines.batches

    def prepare(self, result: RunResult) -> tuple[RunResult, bytes]:
        """Write what belongs to the run (`before_line`) and serialise its record: the record that will be written
        and its line. A run whose record or transcript cannot be serialised (never expected: text is cleaned where
        it enters) is recorded as `internal_error` with the reason, so one run never stops the sweep; an OSError (a
        full disk) propagates."""
        # Written here, on the event loop, before the line is queued: a system call. In the writer thread each call
        # would first wait for the busy loop to hand over the GIL.
        try:
            if self._before_line is not None:
                self._before_line(result)
            return result, result.to_line()
        except OSError:
            raise
        except Exception as exc:
            failed = result.unwritable(f"{type(exc).__name__}: {exc}")
            return failed, failed.to_line()

    async def append(self, line: bytes) -> None:
        """Append one prepared line; returns once it is on disk. Lines appended while a batch is being written join
        the next batch, which is written with one write and one fsync in the store's own thread."""
        await self._lines.submit(line)

    async def commit(self, result: RunResult) -> RunResult:
        """`prepare` then `append`: returns the record as written, once it is on disk."""
        result, line = self.prepare(result)
        await self.append(line)
        return result

    def _write_batch(self, lines: list[bytes]) -> list[None]:
        """Whole lines in one write, then fsync: a kill leaves whole lines and at most one torn tail. A write the
        disk refuses is cut off again, so the file still ends with a whole line."""
        assert self._fd is not None, "open() first"
        data = memoryview(b"".join(lines))
        before = os.fstat(self._fd).st_size
        with writing(self.path):
            try:
                while data:
                    data = data[os.write(self._fd, data) :]
                os.fsync(self._fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, before)
                raise
        return [None] * len(lines)

    def close(self) -> None:
        self._lines.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._lock.release()


class ReportedConfig(BaseModel):
    """What a report reads of config.json (a run directory from any edsb version, possibly hand-edited), read
    through `migrate`: what an older version left out reads as what that version did, or as unknown (None)."""

    model_config = ConfigDict(extra="allow")
    format: StrictInt
    model: StrictStr = ""
    variants: list[StrictStr] = []
    perturb: StrictInt = Field(ge=0)
    sampler: StrictStr
    sandbox: StrictStr
    base_url: StrictStr | None = None
    cases: list[StrictInt] = []
    distraction: list[StrictInt] = []
    repeats: StrictInt | None = None
    temperature: float | None = None
    seed: StrictInt | None = None
    data: StrictStr | None = None
    edsb_version: StrictStr | None = None


def read_reported_config(run_dir: Path) -> ReportedConfig:
    """A directory's config.json as a report reads it (an empty format-1 file when it is missing); an unreadable
    or malformed file is one clear error."""
    config_path = Path(run_dir) / CONFIG_FILE
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raw = {}
    except (OSError, json.JSONDecodeError) as exc:
        raise EdsbError(f"{config_path}: unreadable ({exc})") from None
    if not isinstance(raw, dict):
        raise EdsbError(f"{config_path}: not a run configuration (a JSON object)")
    try:
        return ReportedConfig.model_validate(current_config(raw, str(config_path)))
    except ValidationError as exc:
        raise EdsbError(f"{config_path}: {validation_message(exc)}") from None


@dataclass
class RunDirectory:
    """A run directory as a report sees it: its configuration and its results (files are only read)."""

    path: Path
    config: ReportedConfig
    results: list[RunResult]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, run_dir: Path) -> RunDirectory:
        run_dir = Path(run_dir)
        path = run_dir / RESULTS_FILE
        if not path.is_file():
            raise UsageError(f"{run_dir}: not a run directory (no {RESULTS_FILE})")
        config = read_reported_config(run_dir)
        whole, whole_bytes = read_results(path)
        notes = []
        if whole_bytes < path.stat().st_size:
            notes.append(f"{path}: the last line is torn (a run was killed mid-write) and is left out")
        return cls(run_dir, config, latest_by_key(whole), notes)

    def find(self, case: int, distraction: int, repeat: int, variant: str | None = None) -> RunResult:
        """The result of one run; `variant` defaults to the directory's first variant."""
        variants = list(dict.fromkeys(r.variant for r in self.results))
        chosen = variant or (variants[0] if variants else "")
        for result in self.results:
            if (result.variant, result.case, result.distraction, result.repeat) == (chosen, case, distraction, repeat):
                return result
        raise UsageError(
            f"{self.path}: no run of case {case} at level {distraction}, repeat {repeat}, variant {chosen!r}"
            f" (variants: {', '.join(variants) or 'none'})"
        )


def write_json(path: Path, data: Any, *, durable: bool = False) -> None:
    """Replace a JSON file atomically (a reader sees the old file or the new one, never half of one). `durable`:
    fsynced, file and folder, before this returns (a record that must survive a power cut, not only a kill)."""
    text = json.dumps(data, indent=2) + "\n"
    temporary = path.with_suffix(".tmp")
    with writing(path, temporary):
        if durable:
            with temporary.open("w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        else:
            temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    if durable:
        _fsync_dir(path.parent)
