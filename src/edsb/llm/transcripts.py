"""Transcripts: every request a run sends and what came back, for replay and for reports.

Layout: `<run dir>/transcripts/requests.jsonl`, one file per run directory, appended to by every pass. It holds two
kinds of lines:
- a text, `{"text_id": ..., "text": ...}`: a message text under its content address (`protocol.text_id`), written
  once per pass, before the first record that uses it. Every request repeats the system prompt and the few-shot
  turns; addressing them keeps a Table 1 sweep's transcript under a quarter of the size, written without a file per run;
- a record, `{"format": "edsb.transcript/2", ...}`: the request (its messages as role and `text_id`, its settings
  and sample index), the run and module that sent it, the model identity, then either the response (text, usage,
  finish reason, reported model, latency, source) or the transport error, with start and end times.
A run's lines are kept in memory while it runs and appended when its result is committed, just before its result
line (`write_run`); `close` writes the rest (runs that never got a result line). The API key is never part of a
request, so it cannot reach the file. Format 1 (earlier edsb: one `<run id>.jsonl` per run, messages inline) is
still read; a directory resumed by this edsb holds both.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from edsb.llm.errors import ReplayError, TransportError, TransportKind
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, request_key, text_id
from edsb.results.rundir import open_appending, writing
from edsb.text import TextLimits, clean_text, map_strings, truncate

FORMAT: Final = "edsb.transcript/2"
FORMAT_1: Final = "edsb.transcript/1"
TRANSCRIPTS_DIR = "transcripts"
TRANSCRIPT_FILE = "requests.jsonl"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MESSAGE_CHARS = TextLimits().error_chars  # a transport error's message kept in a transcript


class TranscriptFailure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: TransportKind
    message: str
    status: int | None = None
    attempts: int

    truncated: bool = False  # the message was cut to `MESSAGE_CHARS`
    fix: str | None = None  # what fixes a refusal of the request's shape
    prompt_fault: bool | None = None  # the provider said this prompt is at fault (None: recorded before it said)

    @classmethod
    def of(cls, error: TransportError) -> TranscriptFailure:
        """The failure as recorded: its message (which may quote the server) valid Unicode and bounded."""
        message = clean_text(error.message)
        kept = truncate(message, MESSAGE_CHARS)
        return cls(
            kind=error.kind,
            message=kept,
            status=error.status,
            attempts=error.attempts,
            truncated=kept is not message,
            fix=error.fix,
            prompt_fault=error.prompt_fault,
        )

    def to_error(self) -> TransportError:
        return TransportError(
            self.kind,
            self.message,
            attempts=self.attempts,
            status=self.status,
            fix=self.fix,
            prompt_fault=self.prompt_fault,
        )


class TranscriptRecord(BaseModel):
    """One request and its outcome, its messages in full; exactly one of `response` and `error` is set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    def _one_outcome(self) -> TranscriptRecord:
        if (self.response is None) == (self.error is None):
            raise ValueError("a transcript record holds either a response or an error")
        return self


def transcripts_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / TRANSCRIPTS_DIR


def check_run_id(run: str) -> None:
    """Run ids name runs in transcripts and, in format 1, files: keep them file names."""
    if not _RUN_ID.fullmatch(run):
        raise ValueError(f"run id {run!r} cannot be a file name")


class TranscriptWriter:
    """Records every request of a run; `write_run` or `close` appends them to `<directory>/requests.jsonl`."""

    def __init__(self, directory: Path | str) -> None:
        self.path = Path(directory) / TRANSCRIPT_FILE
        self._pending: dict[str, list[tuple[bytes, list[tuple[str, str]]]]] = {}
        self._written: set[str] = set()  # text ids already in the file from this writer
        self._fd: int | None = None

    def record(self, record: TranscriptRecord) -> None:
        """Keep a record until its run's lines are written."""
        texts = [(text_id(message.content), message.content) for message in record.request.messages]
        request = record.request.model_dump(exclude={"messages"})
        request["messages"] = [
            {"role": message.role, "text_id": tid}
            for message, (tid, _) in zip(record.request.messages, texts, strict=True)
        ]
        payload = {
            "format": FORMAT,
            "key": record.key,
            "run": record.run,
            "module": record.module,
            "model": record.model,
            "request": request,
            "response": record.response,
            "error": record.error,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
        }
        try:
            line = to_json(payload)
        except PydanticSerializationError:  # text that entered uncleaned: the transcript stays valid UTF-8 JSON
            line = to_json(map_strings(to_jsonable_python(payload), clean_text)[0])
        self._pending.setdefault(record.run, []).append((line + b"\n", texts))

    def write_run(self, run: str) -> None:
        """Append the run's records not yet written, each preceded by the texts the file does not hold yet."""
        records = self._pending.pop(run, None)
        if not records:
            return
        lines = []
        for line, texts in records:
            for tid, text in texts:
                if tid not in self._written:
                    self._written.add(tid)
                    lines.append(to_json({"text_id": tid, "text": text}) + b"\n")
            lines.append(line)
        with writing(self.path):  # a full disk names the file
            if self._fd is None:
                self._fd = open_appending(self.path)
            os.write(self._fd, b"".join(lines))

    def discard_run(self, run: str) -> None:
        """Forget the run's records kept so far: it will be run again whole (it waits for a batch)."""
        self._pending.pop(run, None)

    def close(self) -> None:
        """Write every record still kept (runs that never got a result line), then release the file."""
        try:
            for run in list(self._pending):
                self.write_run(run)
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    async def complete(self, model: ChatModel, request: ChatRequest, *, run: str, module: str) -> ChatResponse:
        """Ask `model`, record the outcome, and return the response or re-raise the transport error."""
        check_run_id(run)  # a bad run id should fail before the model is paid
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
    """Records of one file (either format) in order. A last line without its newline was cut by a crash and is
    skipped; anything else that does not parse is a ReplayError naming the line."""
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    texts: dict[str, str] = {}
    parsed: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            if number == len(lines) and not line.endswith("\n"):
                break
            raise ReplayError(f"{path}:{number}: not a transcript line (not JSON)") from None
        if _is_text(data):
            texts[data["text_id"]] = data["text"]
            continue
        parsed.append((number, data))
    for number, data in parsed:
        try:
            yield TranscriptRecord.model_validate(_full_record(data, texts))
        except ValidationError as exc:
            raise ReplayError(f"{path}:{number}: not a transcript record ({exc.errors()[0]['msg']})") from None
        except _MissingText as missing:
            raise ReplayError(f"{path}:{number}: the record names text {missing} that the file does not hold") from None
        except _UnknownFormat as unknown:
            raise ReplayError(f"{path}:{number}: not a transcript record (format {unknown})") from None


def _is_text(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "format" not in data
        and isinstance(data.get("text_id"), str)
        and isinstance(data.get("text"), str)
    )


class _MissingText(Exception):
    pass


class _UnknownFormat(Exception):
    pass


def _full_record(data: Any, texts: dict[str, str]) -> Any:
    """A line as a TranscriptRecord's fields: format 2 messages get their texts back; anything else malformed is
    left for validation to report."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    version = data.pop("format", None)
    if version not in (FORMAT, FORMAT_1):
        raise _UnknownFormat(repr(version))
    request = data.get("request")
    if version == FORMAT and isinstance(request, dict) and isinstance(request.get("messages"), list):
        messages = []
        for message in request["messages"]:
            if isinstance(message, dict) and "text_id" in message:
                if message["text_id"] not in texts:
                    raise _MissingText(message["text_id"])
                message = {"role": message.get("role"), "content": texts[message["text_id"]]}
            messages.append(message)
        data["request"] = {**request, "messages": messages}
    return data


def read_transcripts(path: Path | str) -> list[TranscriptRecord]:
    return [record for file in transcript_files(path) for record in read_transcript(file)]


def transcripts_by_run(run_dir: Path | str) -> dict[str, list[TranscriptRecord]]:
    """Every record of a run directory (none if it has no transcripts), by run id, in the order each run sent them."""
    by_run: dict[str, list[TranscriptRecord]] = {}
    for record in read_transcripts(transcripts_dir(run_dir)):
        by_run.setdefault(record.run, []).append(record)
    return by_run
