"""The record of each provider batch an `edsb run --batch` sends, under `batches/` in the run directory.

A record is written, fsynced, BEFORE the batch is created (its intent: the requests it carries, by cache key), again
once the provider has named the batch, and once its answers are in the response cache. So after a kill at any point
the same command knows every batch that may be in flight and polls it instead of paying for its requests again.
Each file carries `format` (`BATCH_FORMAT`); one reader takes any format edsb wrote.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edsb.errors import EdsbError
from edsb.results.migrate import format_of
from edsb.results.rundir import BATCHES_DIR, write_json

BATCH_FORMAT: Final = 1
BatchStage = Literal["intent", "submitted", "collected", "exported"]


class BatchTokens(BaseModel):
    """The tokens a batch's answers were billed for, for the cost at batch prices."""

    model_config = ConfigDict(extra="forbid")

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cache_write: int = 0


class BatchRecord(BaseModel):
    """One batch: `intent` (its requests chosen, nothing sent yet, or sent without the id coming back), `submitted`
    (the provider's `batch_id` known), `collected` (its answers stored; `failures` what it did not answer);
    `exported`: written to a file (`batch_id`, its path) for a server's offline batch, waiting for its answers."""

    model_config = ConfigDict(extra="forbid")

    format: int = BATCH_FORMAT
    number: int = Field(ge=1)
    tag: str  # names the batch at the provider, where the API keeps a label, so an unrecorded id can be found
    provider: str
    model: str
    stage: BatchStage = "intent"
    batch_id: str | None = None
    created_at: str = Field(default_factory=lambda: _now())
    submitted_at: str | None = None
    collected_at: str | None = None
    requests: dict[str, dict[str, Any]]  # cache key -> the settings it sends (`ChatResponse.sent`)
    digests: dict[str, str] = Field(default_factory=dict)  # cache key -> its input line's `line_digest`
    failures: dict[str, dict[str, Any]] = Field(default_factory=dict)  # cache key -> `BatchFailure` fields
    answered: int = 0
    tokens: BatchTokens = Field(default_factory=BatchTokens)

    @property
    def path_name(self) -> str:
        return f"{self.number:04d}.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_tag() -> str:
    return secrets.token_hex(8)


def batches_dir(run_dir: Path) -> Path:
    return Path(run_dir) / BATCHES_DIR


def read_batches(run_dir: Path) -> list[BatchRecord]:
    """Every batch record of the directory, in the order they were made."""
    records = []
    for path in sorted(batches_dir(run_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            format_of(data, BATCH_FORMAT, str(path))
            record = BatchRecord.model_validate(data)
            if record.path_name != path.name:
                raise ValueError(f"it says it is batch {record.number}")
            records.append(record)
        except (OSError, ValueError, ValidationError) as exc:
            why = f"{path}: not a batch record edsb can read ({exc}); move it aside to resend its requests"
            raise EdsbError(why) from None
    return records


def write_batch(run_dir: Path, record: BatchRecord) -> None:
    """The record, replaced atomically and fsynced before this returns."""
    directory = batches_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / record.path_name, record.model_dump(mode="json"), durable=True)


def submitted(record: BatchRecord, batch_id: str) -> BatchRecord:
    return record.model_copy(update={"stage": "submitted", "batch_id": batch_id, "submitted_at": _now()})


def collected(
    record: BatchRecord, failures: dict[str, dict[str, Any]], answered: int, tokens: BatchTokens
) -> BatchRecord:
    update = {"stage": "collected", "collected_at": _now(), "failures": failures, "answered": answered}
    return record.model_copy(update={**update, "tokens": tokens})
