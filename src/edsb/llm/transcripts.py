"""Transcripts: every request a run sends and what came back, one JSON line each, for replay and for reports.

Layout: `<run dir>/transcripts/<run id>.jsonl`, one file per run (`tc04-d1-r3`, or whatever id the runner gives).
A run's records are kept in memory while it runs and appended when it ends: the runner hands them to the result
store, which appends them when it commits the run, just before the run's result line (`take`); others `flush`.
A record holds the request (messages, settings, sample index), the module that sent it, the model identity, then
either the response (text, usage, finish reason, reported model, latency, source) or the transport error, with
start and end times. The API key is never part of a request, so it cannot reach these files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from edsb.llm.errors import ReplayError, TransportError, TransportKind
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, request_key
from edsb.results.rundir import append_lines

FORMAT: Final = "edsb.transcript/1"
TRANSCRIPTS_DIR = "transcripts"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class TranscriptFailure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: TransportKind
    message: str
    status: int | None = None
    attempts: int

    @classmethod
    def of(cls, error: TransportError) -> TranscriptFailure:
        return cls(kind=error.kind, message=error.message, status=error.status, attempts=error.attempts)

    def to_error(self) -> TransportError:
        return TransportError(self.kind, self.message, attempts=self.attempts, status=self.status)


class TranscriptRecord(BaseModel):
    """One request and its outcome; exactly one of `response` and `error` is set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["edsb.transcript/1"] = FORMAT
    key: str  # request_key(model, request), the hash the cache and replay use
    run: str
    module: str
    model: str  # identity of the model asked
    request: ChatRequest
    response: ChatResponse | None = None
    error: TranscriptFailure | None = None
    started_at: datetime
    finished_at: datetime

    @model_validator(mode="after")
    def _one_outcome(self) -> Self:
        if (self.response is None) == (self.error is None):
            raise ValueError("a transcript record holds either a response or an error")
        return self


def transcripts_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / TRANSCRIPTS_DIR


class TranscriptWriter:
    """Records every request of a run; `take` or `flush` puts them in `<directory>/<run id>.jsonl`."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._pending: dict[str, list[bytes]] = {}

    def path_for(self, run: str) -> Path:
        if not _RUN_ID.fullmatch(run):
            raise ValueError(f"run id {run!r} cannot be a file name")
        return self.directory / f"{run}.jsonl"

    def record(self, record: TranscriptRecord) -> None:
        """Keep a record until its run's lines are taken or flushed."""
        self._pending.setdefault(record.run, []).append((record.model_dump_json() + "\n").encode("utf-8"))

    def take(self, run: str) -> list[tuple[Path, bytes]]:
        """The run's records not yet written, as (file, lines) for the caller to append; none are kept."""
        lines = self._pending.pop(run, None)
        return [(self.path_for(run), b"".join(lines))] if lines else []

    def flush(self) -> None:
        """Append every kept record to its file now: for callers that do not hand them on."""
        for run in list(self._pending):
            for path, lines in self.take(run):
                append_lines(path, lines)

    async def complete(self, model: ChatModel, request: ChatRequest, *, run: str, module: str) -> ChatResponse:
        """Ask `model`, record the outcome, and return the response or re-raise the transport error."""
        self.path_for(run)  # a bad run id should fail before the model is paid
        started_at = datetime.now(UTC)
        response: ChatResponse | None = None
        failure: TranscriptFailure | None = None
        try:
            response = await model.complete(request)
            return response
        except TransportError as error:
            failure = TranscriptFailure.of(error)
            raise
        finally:
            if response is not None or failure is not None:
                self.record(
                    TranscriptRecord(
                        key=request_key(model.identity, request),
                        run=run,
                        module=module,
                        model=model.identity,
                        request=request,
                        response=response,
                        error=failure,
                        started_at=started_at,
                        finished_at=datetime.now(UTC),
                    )
                )


def transcript_files(path: Path | str) -> list[Path]:
    """A run directory (its `transcripts/`), a transcripts directory, or one `.jsonl` file."""
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / TRANSCRIPTS_DIR).is_dir():
        path = path / TRANSCRIPTS_DIR
    return sorted(path.rglob("*.jsonl")) if path.is_dir() else []


def read_transcript(path: Path) -> Iterator[TranscriptRecord]:
    """Records of one file in order. A last line without its newline was cut by a crash and is skipped."""
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield TranscriptRecord.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines) and not line.endswith("\n"):
                return
            raise ReplayError(f"{path}:{number}: not a transcript record ({exc.errors()[0]['msg']})") from None


def read_transcripts(path: Path | str) -> list[TranscriptRecord]:
    return [record for file in transcript_files(path) for record in read_transcript(file)]
