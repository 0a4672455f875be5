"""Text a server sends becomes valid Unicode where it enters edsb (`ChatResponse`), whichever client built the
response, and transcripts stay valid UTF-8 JSON with transport messages bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from edsb.llm.errors import TransportError
from edsb.llm.protocol import ChatRequest, ChatResponse, Message
from edsb.llm.transcripts import MESSAGE_CHARS, TranscriptFailure, TranscriptRecord, TranscriptWriter, read_transcript


def _response(**fields: object) -> ChatResponse:
    values: dict[str, object] = {
        "text": "ok",
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "latency_s": 0.0,
        "model": "m",
        "finish_reason": "stop",
    }
    return ChatResponse(**(values | fields))  # type: ignore[arg-type]


def test_lone_surrogates_in_a_response_are_replaced_and_flagged() -> None:
    response = _response(text="a\ud800b", model="m\udfff", finish_reason="\udc00")
    assert (response.text, response.model, response.finish_reason) == ("a\ufffdb", "m\ufffd", "\ufffd")
    assert response.surrogates_replaced
    assert not _response(text="é \U0001f600").surrogates_replaced
    stored = ChatResponse.model_validate_json(response.model_dump_json())  # the cache's round trip
    assert stored == response


def test_a_response_read_from_json_escapes_is_cleaned_too() -> None:
    line = json.dumps(_response().model_dump() | {"text": "\ud800"})  # `\ud800` as an escape, as a file holds it
    assert ChatResponse.model_validate(json.loads(line)).text == "\ufffd"


def test_message_contents_are_valid_unicode() -> None:
    assert Message(role="user", content="x\ud800").content == "x\ufffd"


def test_a_transport_message_is_cleaned_and_bounded_in_the_transcript() -> None:
    error = TransportError("http", "bad \ud800 " + "y" * 100_000, attempts=1, status=500)
    failure = TranscriptFailure.of(error)
    assert failure.message.startswith("bad \ufffd yyy") and failure.truncated
    assert len(failure.message) < MESSAGE_CHARS + 40
    assert not TranscriptFailure.of(TransportError("http", "short", attempts=1)).truncated


def test_a_transcript_holding_hostile_text_stays_valid_utf8_json(tmp_path: Path) -> None:
    writer = TranscriptWriter(tmp_path)
    request = ChatRequest(messages=(Message(role="user", content="q \ud800"),), temperature=0.0)
    now = datetime.now(UTC)
    for run, response, failure in [
        ("r1", _response(text="\udfff", model="m\ud800"), None),
        ("r2", None, TranscriptFailure.of(TransportError("http", "\ud800", attempts=1))),
    ]:
        record = TranscriptRecord(
            key="k",
            run=run,
            module="narrator",
            model="m",
            request=request,
            response=response,
            error=failure,
            started_at=now,
            finished_at=now,
        )
        writer.record(record)
        writer.write_run(run)
    writer.close()
    text = (tmp_path / "requests.jsonl").read_bytes().decode("utf-8")
    assert "\\ud8" not in text and "\\udf" not in text
    records = list(read_transcript(tmp_path / "requests.jsonl"))
    assert records[0].response is not None and records[0].response.text == "\ufffd"
    assert records[1].error is not None and records[1].error.message == "\ufffd"


def test_a_record_built_without_validation_is_still_written_as_valid_utf8(tmp_path: Path) -> None:
    """The net under the cleaning: a response that skipped its validator (built by `model_construct`)."""
    writer = TranscriptWriter(tmp_path)
    request = ChatRequest(messages=(Message(role="user", content="q"),), temperature=0.0)
    response = ChatResponse.model_construct(**(_response().model_dump() | {"text": "\ud800 raw"}))
    now = datetime.now(UTC)
    writer.record(
        TranscriptRecord.model_construct(
            key="k",
            run="r",
            module="narrator",
            model="m",
            request=request,
            response=response,
            error=None,
            started_at=now,
            finished_at=now,
        )
    )
    writer.close()
    (record,) = read_transcript(tmp_path / "requests.jsonl")
    assert record.response is not None and record.response.text == "\ufffd raw"
