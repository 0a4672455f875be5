"""Transcripts: every request a run sends and what came back, one JSON line each, for replay and for reports.

Layout: `<run dir>/transcripts/<run id>.jsonl`, one file per run (`tc04-d1-r3`, or whatever id the runner gives),
appended to as the run's modules call the model. A record holds the request (messages, settings, sample index), the
module that sent it, the model identity, then either the response (text, usage, finish reason, reported model,
latency, source) or the transport error, with start and end times. The API key is never part of a request, so it
cannot reach these files.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from edsb.llm.errors import ReplayError, TransportError, TransportKind
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, request_key

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


def _drop_torn_tail(handle: BinaryIO) -> None:
    """A process killed mid-write leaves a last line without its newline; cut it so the next record starts clean."""
    end = handle.seek(0, os.SEEK_END)
    if end == 0:
        return
    with open(handle.name, "rb") as reader:
        content = reader.read(end)
    if not content.endswith(b"\n"):
        handle.truncate(content.rfind(b"\n") + 1)


def transcripts_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / TRANSCRIPTS_DIR


class TranscriptWriter:
    """Appends records to `<directory>/<run id>.jsonl`; each line is written whole, flushed and fsynced."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def path_for(self, run: str) -> Path:
        if not _RUN_ID.fullmatch(run):
            raise ValueError(f"run id {run!r} cannot be a file name")
        return self.directory / f"{run}.jsonl"

    def write(self, record: TranscriptRecord) -> None:
        path = self.path_for(record.run)
        self.directory.mkdir(parents=True, exist_ok=True)
        line = (record.model_dump_json() + "\n").encode("utf-8")
        with path.open("ab") as handle:
            _drop_torn_tail(handle)
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

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
                # In a worker thread: the fsync must not hold up the event loop and the other runs' requests.
                await asyncio.to_thread(
                    self.write,
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
                    ),
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
