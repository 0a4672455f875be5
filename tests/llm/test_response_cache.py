"""The SQLite response cache, in front of a real loopback server and across real processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from edsb.llm import (
    CachedChatModel,
    CacheError,
    ChatRequest,
    ChatResponse,
    OpenAIChatModel,
    ResponseCache,
    RetryPolicy,
    TransportError,
    build_model,
    default_cache_path,
)
from tests.support.openai_server import OpenAIServer, Reply


def ask(server: OpenAIServer, cache_path: Path, *requests: ChatRequest, model_name: str = "gpt-test"):
    async def run():
        inner = OpenAIChatModel(model_name, base_url=server.base_url, retry=RetryPolicy(max_retries=0))
        model = CachedChatModel(inner, ResponseCache(cache_path))
        try:
            return [await model.complete(request) for request in requests]
        finally:
            await model.aclose()

    return asyncio.run(run())


def request(**changes: object) -> ChatRequest:
    settings: dict[str, object] = {
        "messages": [{"role": "user", "content": "Plan the next event."}],
        "temperature": 0.1,
        "json_mode": True,
        "sample_index": 0,
    }
    settings.update(changes)
    return ChatRequest(**settings)  # type: ignore[arg-type]


def test_identical_request_is_served_from_cache(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.enqueue(Reply.completion('{"n": 1}', prompt_tokens=40, completion_tokens=4), Reply.completion("2"))
    first, second = ask(openai_server, tmp_path / "c.sqlite3", request(), request())
    assert len(openai_server.chat_requests) == 1
    assert (first.source, second.source) == ("model", "cache")
    assert second.model_dump(exclude={"source"}) == first.model_dump(exclude={"source"})


def test_cache_persists_across_openings(openai_server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    [live] = ask(openai_server, path, request())
    [again] = ask(openai_server, path, request())
    assert len(openai_server.chat_requests) == 1
    assert (again.text, again.source) == (live.text, "cache")


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.7},
        {"sample_index": 1},
        {"json_mode": False},
        {"seed": 3},
        {"max_tokens": 100},
        {"messages": [{"role": "user", "content": "Plan another event."}]},
    ],
    ids=["temperature", "sample-index", "json-mode", "seed", "max-tokens", "messages"],
)
def test_any_changed_setting_misses(openai_server: OpenAIServer, tmp_path: Path, change: dict[str, object]) -> None:
    first, second = ask(openai_server, tmp_path / "c.sqlite3", request(), request(**change))
    assert len(openai_server.chat_requests) == 2
    assert (first.source, second.source) == ("model", "model")


def test_other_model_or_server_misses(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with OpenAIServer() as one, OpenAIServer() as two:
        ask(one, path, request())
        ask(one, path, request(), model_name="other-model")
        ask(two, path, request())
        assert (len(one.chat_requests), len(two.chat_requests)) == (2, 1)


def test_five_repeats_stay_five_samples(openai_server: OpenAIServer, tmp_path: Path) -> None:
    repeats = [request(sample_index=r) for r in range(5)]
    ask(openai_server, tmp_path / "c.sqlite3", *repeats)
    again = ask(openai_server, tmp_path / "c.sqlite3", *repeats)
    assert len(openai_server.chat_requests) == 5
    assert {response.source for response in again} == {"cache"}


def test_transport_errors_are_not_cached(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.enqueue(Reply.error(500))
    with pytest.raises(TransportError):
        ask(openai_server, tmp_path / "c.sqlite3", request())
    [response] = ask(openai_server, tmp_path / "c.sqlite3", request())
    assert response.source == "model"
    assert len(openai_server.chat_requests) == 2


def _write_rows(path: str, worker: int, count: int) -> int:
    cache = ResponseCache(path)
    for i in range(count):
        response = ChatResponse(
            text=f"{worker}-{i}", prompt_tokens=i, completion_tokens=1, latency_s=0.1, model="m", finish_reason="stop"
        )
        cache.put(f"own-{worker}-{i}", "m", response)
        cache.put(f"shared-{i}", "m", response)
    cache.close()
    return count


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    workers, rows = 3, 150
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_write_rows, [str(path)] * workers, range(workers), [rows] * workers))
    assert done == [rows] * workers
    cache = ResponseCache(path)
    assert len(cache) == workers * rows + rows
    assert cache.get("own-2-149").text == "2-149"  # type: ignore[union-attr]
    assert cache.get("shared-7").text in {"0-7", "1-7", "2-7"}  # type: ignore[union-attr]
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _open_and_count(path: str) -> int:
    cache = ResponseCache(path)
    try:
        return len(cache)
    finally:
        cache.close()


def test_processes_opening_a_new_cache_together_all_succeed(tmp_path: Path) -> None:
    """Switching a fresh file to WAL races between processes, and SQLite answers that race with `database is
    locked` at once; every opener must wait its turn instead."""
    workers, rounds = 6, 60
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for n in range(rounds):
            path = str(tmp_path / f"fresh-{n}.sqlite3")
            assert list(pool.map(_open_and_count, [path] * workers)) == [0] * workers
            assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, openai_server: OpenAIServer) -> None:
    monkeypatch.setenv("EDSB_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert default_cache_path() == tmp_path / "elsewhere" / "responses.sqlite3"
    model = build_model("openai:gpt-test", base_url=openai_server.base_url)
    assert isinstance(model, CachedChatModel)
    assert model.cache.path == default_cache_path()
    explicit = build_model("openai:gpt-test", base_url=openai_server.base_url, cache=tmp_path / "mine.sqlite3")
    assert isinstance(explicit, CachedChatModel)
    assert explicit.cache.path == tmp_path / "mine.sqlite3"
    assert not isinstance(build_model("openai:gpt-test", base_url=openai_server.base_url, cache=False), CachedChatModel)


def test_unusable_cache_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheError, match=r"broken\.sqlite3"):
        ResponseCache(path)


def test_lookups_and_stores_in_flight_share_one_transaction(tmp_path: Path) -> None:
    """A runner's many requests in flight reach the cache a batch at a time: one thread hand-off and one SQLite
    transaction per batch, each caller still getting its own answer, a store returning once committed, the first
    answer stored for a key winning."""
    cache = ResponseCache(tmp_path / "c.sqlite3")
    n = 1000

    def answer(i: int) -> ChatResponse:
        return ChatResponse(
            text=f"answer {i}", prompt_tokens=i, completion_tokens=1, latency_s=0.1, model="m", finish_reason="stop"
        )

    async def sweep() -> tuple[list[ChatResponse | None], list[ChatResponse | None]]:
        missing = await asyncio.gather(*(cache.lookup(f"key-{i}") for i in range(n)))
        stores = [cache.store(f"key-{i}", "m", answer(i)) for i in range(n)]
        await asyncio.gather(*stores, cache.store("key-0", "m", answer(-1)))  # a second answer for key-0: ignored
        assert len(cache) == n  # committed when the stores return
        return missing, await asyncio.gather(*(cache.lookup(f"key-{i}") for i in range(n)))

    missing, found = asyncio.run(sweep())
    assert missing == [None] * n
    assert [response.text if response else None for response in found] == [f"answer {i}" for i in range(n)]
    assert cache.batches == 3  # each wave submitted at once went as one batch
    assert cache.get("key-7") == answer(7) and cache.get(f"key-{n}") is None  # the same rows, read in this thread
    cache.close()
