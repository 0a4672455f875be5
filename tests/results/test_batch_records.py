"""The record of each provider batch under `batches/`: written whole, read back, and refused when a newer edsb
wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.errors import EdsbError
from edsb.results.batches import BATCH_FORMAT, BatchRecord, batches_dir, read_batches, submitted, write_batch


def _record(number: int = 1) -> BatchRecord:
    return BatchRecord(number=number, tag="t", provider="openai", model="openai:m@u", requests={"k": {"seed": 1}})


def test_a_record_goes_from_intent_to_submitted_and_reads_back(tmp_path: Path) -> None:
    write_batch(tmp_path, _record())
    assert read_batches(tmp_path)[0].stage == "intent"
    write_batch(tmp_path, submitted(_record(), "batch_1"))
    (record,) = read_batches(tmp_path)
    assert (record.stage, record.batch_id, record.requests) == ("submitted", "batch_1", {"k": {"seed": 1}})
    data = json.loads((batches_dir(tmp_path) / "0001.json").read_text())
    assert data["format"] == BATCH_FORMAT
    assert not list(batches_dir(tmp_path).glob("*.tmp"))  # replaced whole


def test_a_record_of_a_newer_edsb_is_one_clear_error(tmp_path: Path) -> None:
    write_batch(tmp_path, _record().model_copy(update={"format": BATCH_FORMAT + 1}))
    with pytest.raises(EdsbError, match="newer edsb"):
        read_batches(tmp_path)
