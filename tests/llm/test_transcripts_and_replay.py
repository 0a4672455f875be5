"""Transcripts written for a run, then replayed: hits answer without the server, misses are explicit errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from edsb.llm import (
    ChatModel,
    ChatRequest,
    OpenAIChatModel,
    ReplayChatModel,
    ReplayError,
    RetryPolicy,
    TranscriptWriter,
    TransportError,
    build_model,
    check_model,
    read_transcripts,
    request_key,
    transcripts_by_run,
    transcripts_dir,
)
from edsb.llm.protocol import text_id
from tests.support.openai_server import OpenAIServer, Reply

SECRET = "sk-live-should-never-be-written"


def narrator(sample_index: int) -> ChatRequest:
    messages = [{"role": "system", "content": "Narrate."}, {"role": "user", "content": "Instruction: serve coffee."}]
    return ChatRequest(messages=messages, temperature=0.1, json_mode=True, sample_index=sample_index)


def parser(sample_index: int) -> ChatRequest:
    messages = [{"role": "system", "content": "Parse."}, {"role": "user", "content": "Event: Ann serves coffee."}]
    return ChatRequest(messages=messages, temperature=0.1, json_mode=False, sample_index=sample_index)


@pytest.fixture
def recorded_run(openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run directory holding transcripts of two runs; the second run's parser call failed in transport."""
    monkeypatch.setenv("SECRET_KEY_VAR", SECRET)
    openai_server.enqueue(
        Reply.completion('{"event": "coffee"}', prompt_tokens=30, completion_tokens=6),
        Reply.completion("```python\nparse()\n```", prompt_tokens=25, completion_tokens=9),
        Reply.completion('{"event": "tea"}'),
        Reply.error(503, "overloaded"),
    )
    run_dir = tmp_path / "run"
    writer = TranscriptWriter(transcripts_dir(run_dir))

    async def record() -> None:
        model = OpenAIChatModel(
            "gpt-test", base_url=openai_server.base_url, api_key_env="SECRET_KEY_VAR", retry=RetryPolicy(max_retries=0)
        )
        await writer.complete(model, narrator(0), run="tc01-d0-r0", module="narrator")
        await writer.complete(model, parser(0), run="tc01-d0-r0", module="event_parser")
        await writer.complete(model, narrator(1), run="tc01-d0-r1", module="narrator")
        with pytest.raises(TransportError):
            await writer.complete(model, parser(1), run="tc01-d0-r1", module="event_parser")
        await model.aclose()
        writer.close()

    asyncio.run(record())
    return run_dir


def test_transcript_files_and_records(recorded_run: Path, openai_server: OpenAIServer) -> None:
    assert [path.name for path in transcripts_dir(recorded_run).iterdir()] == ["requests.jsonl"]
    records = read_transcripts(recorded_run)
    assert [(r.run, r.module) for r in records] == [
        ("tc01-d0-r0", "narrator"),
        ("tc01-d0-r0", "event_parser"),
        ("tc01-d0-r1", "narrator"),
        ("tc01-d0-r1", "event_parser"),
    ]
    first = records[0]
    assert first.model == f"openai:gpt-test@{openai_server.base_url}"
    assert first.key == request_key(first.model, first.request)
    assert first.request == narrator(0)
    assert first.response is not None
    assert (first.response.text, first.response.prompt_tokens, first.response.completion_tokens) == (
        '{"event": "coffee"}',
        30,
        6,
    )
    assert first.started_at <= first.finished_at
    failed = records[3]
    assert failed.response is None
    assert failed.error is not None
    assert (failed.error.kind, failed.error.status, failed.error.attempts) == ("http", 503, 1)


def test_each_message_text_is_written_once(recorded_run: Path) -> None:
    """Texts are stored by content address: the two Narrator requests share their system prompt, written once,
    before the first record that names it."""
    lines = [json.loads(line) for line in (transcripts_dir(recorded_run) / "requests.jsonl").read_text().splitlines()]
    texts = [line["text"] for line in lines if "text_id" in line]
    assert sorted(texts) == sorted(
        ["Narrate.", "Instruction: serve coffee.", "Parse.", "Event: Ann serves coffee."]
    )  # four distinct texts across four requests of two messages each
    record = next(line for line in lines if "format" in line)
    assert set(record) == {
        "format", "key", "run", "module", "model", "request", "response", "error", "started_at", "finished_at",
    }  # fmt: skip
    assert record["format"] == "edsb.transcript/2"
    assert record["request"]["messages"] == [
        {"role": "system", "text_id": text_id("Narrate.")},
        {"role": "user", "text_id": text_id("Instruction: serve coffee.")},
    ]
    assert (record["request"]["temperature"], record["request"]["json_mode"]) == (0.1, True)
    defined = {line["text_id"]: number for number, line in enumerate(lines) if "text_id" in line}
    for number, line in enumerate(lines):
        if "format" in line:
            assert all(defined[m["text_id"]] < number for m in line["request"]["messages"])


def test_format_1_transcripts_are_still_read(recorded_run: Path, tmp_path: Path) -> None:
    """A directory written by an earlier edsb (one file per run, messages inline), resumed by this one: a replay
    answers from both formats."""
    records = read_transcripts(recorded_run)
    old = tmp_path / "old"
    transcripts_dir(old).mkdir(parents=True)
    with (transcripts_dir(old) / "tc01-d0-r0.jsonl").open("w") as handle:
        for record in records[:2]:
            handle.write(json.dumps({"format": "edsb.transcript/1", **record.model_dump(mode="json")}) + "\n")
    writer = TranscriptWriter(transcripts_dir(old))
    for record in records[2:]:
        writer.record(record)
    writer.close()
    assert sorted(read_transcripts(old), key=lambda r: (r.run, r.started_at)) == records
    assert [len(runs) for runs in transcripts_by_run(old).values()] == [2, 2]
    replay = ReplayChatModel(old)
    assert asyncio.run(replay.complete(narrator(0))).text == '{"event": "coffee"}'
    assert asyncio.run(replay.complete(narrator(1))).text == '{"event": "tea"}'


def test_a_record_whose_text_is_missing_is_reported(recorded_run: Path) -> None:
    path = transcripts_dir(recorded_run) / "requests.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    first_text = next(number for number, line in enumerate(lines) if '"text_id"' in line and '"format"' not in line)
    path.write_text("".join(line for number, line in enumerate(lines) if number != first_text))
    with pytest.raises(ReplayError, match=r"requests\.jsonl:\d+: the record names text [0-9a-f]{64}"):
        read_transcripts(recorded_run)


def test_the_api_key_is_never_written(recorded_run: Path, openai_server: OpenAIServer) -> None:
    assert openai_server.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was really used
    for path in recorded_run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text()


def test_replay_answers_recorded_requests_without_the_server(recorded_run: Path, openai_server: OpenAIServer) -> None:
    sent_before = len(openai_server.chat_requests)
    model = build_model(f"replay:{recorded_run}")
    assert isinstance(model, ReplayChatModel)
    assert model.identity == f"openai:gpt-test@{openai_server.base_url}"

    async def replay():
        return [await model.complete(narrator(0)), await model.complete(parser(0)), await model.complete(narrator(1))]

    coffee, code, tea = asyncio.run(replay())
    assert (coffee.text, coffee.prompt_tokens, coffee.source) == ('{"event": "coffee"}', 30, "replay")
    assert code.text == "```python\nparse()\n```"
    assert tea.text == '{"event": "tea"}'
    assert len(openai_server.chat_requests) == sent_before


def test_check_model_on_a_replay_directory(recorded_run: Path, openai_server: OpenAIServer) -> None:
    assert check_model(f"replay:{recorded_run}") == {
        "ok": True,
        "model": f"replay:{recorded_run}",
        "recorded_model": f"openai:gpt-test@{openai_server.base_url}",
        "recorded_requests": 4,
    }


def test_every_model_kind_is_a_chat_model(recorded_run: Path, openai_server: OpenAIServer) -> None:
    kinds = [
        build_model(f"replay:{recorded_run}"),
        build_model("openai:gpt-test", base_url=openai_server.base_url, cache=False),
        build_model("openai:gpt-test", base_url=openai_server.base_url, cache=recorded_run / "cache.sqlite3"),
        build_model("local", cache=False),
    ]
    assert all(isinstance(model, ChatModel) for model in kinds)


def test_replay_raises_recorded_transport_errors(recorded_run: Path) -> None:
    with pytest.raises(TransportError) as caught:
        asyncio.run(ReplayChatModel(recorded_run).complete(parser(1)))
    assert (caught.value.kind, caught.value.status) == ("http", 503)


@pytest.mark.parametrize(
    "unrecorded",
    [narrator(2), parser(0).model_copy(update={"temperature": 0.2}), parser(0).model_copy(update={"json_mode": True})],
    ids=["other-sample", "other-temperature", "other-json-mode"],
)
def test_unrecorded_request_is_an_explicit_error(recorded_run: Path, unrecorded: ChatRequest) -> None:
    with pytest.raises(ReplayError, match="not recorded"):
        asyncio.run(ReplayChatModel(recorded_run).complete(unrecorded))


def test_replay_needs_transcripts(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="does not exist"):
        ReplayChatModel(tmp_path / "missing")
    with pytest.raises(ReplayError, match="no transcripts"):
        ReplayChatModel(tmp_path)


def test_torn_last_line_is_skipped_but_corruption_is_reported(recorded_run: Path) -> None:
    path = transcripts_dir(recorded_run) / "requests.jsonl"
    with path.open("a") as handle:
        handle.write('{"format": "edsb.transcript/2", "key": "ab')  # a crash in the middle of a write
    assert len(read_transcripts(recorded_run)) == 4
    good = path.read_text().rpartition("\n")[0] + "\n"  # the whole lines, without the torn one
    path.write_text("not json\n" + good)
    with pytest.raises(ReplayError, match=r"requests\.jsonl:1"):
        read_transcripts(recorded_run)
    path.write_text(good + '{"format": "edsb.transcript/9", "key": "k"}\n')
    with pytest.raises(ReplayError, match=r"requests\.jsonl:\d+: not a transcript record \(format '.*/9'\)"):
        read_transcripts(recorded_run)


def test_run_ids_must_be_file_names(recorded_run: Path) -> None:
    class NeverAsked:
        identity = "never"

        async def complete(self, request: ChatRequest) -> None:
            raise AssertionError("the model was asked")

    writer = TranscriptWriter(recorded_run)
    with pytest.raises(ValueError, match="cannot be a file name"):
        asyncio.run(writer.complete(NeverAsked(), narrator(0), run="../escape", module="narrator"))  # type: ignore[arg-type]


def test_a_torn_last_line_is_cut_before_the_next_record(recorded_run: Path, tmp_path: Path) -> None:
    """A second pass (a new writer) appends after cutting the torn tail a killed one left, and writes the texts its
    records need again: the file stays readable whatever pass wrote what."""
    record = read_transcripts(recorded_run)[0]
    writer = TranscriptWriter(tmp_path)
    writer.record(record)
    writer.close()
    with writer.path.open("ab") as handle:
        handle.write(b'{"format": "edsb.transcript/2", "key": "cut sho')  # a write killed half-way
    second = TranscriptWriter(tmp_path)
    second.record(record)
    second.close()
    assert [r.key for r in read_transcripts(writer.path)] == [record.key, record.key]
    assert writer.path.read_bytes().count(b"\n") == 2 * (1 + len(record.request.messages))
