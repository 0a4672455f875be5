"""A persistent response cache in SQLite, shared by every run, process and thread on the machine.

Keys are `request_key` hashes, so the model identity, the server, the messages, every sampling setting and the
caller's sample index all take part: a second run of the same repeat is answered from disk, another repeat is not.
WAL journaling plus a busy timeout let several processes write at once; the first answer stored for a key wins.
Only completions are stored; transport failures are never cached.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import platformdirs
from pydantic import ValidationError

from edsb.errors import EdsbError
from edsb.group_commit import GroupCommit
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, request_key

CACHE_DIR_ENV = "EDSB_CACHE_DIR"
CACHE_FILE = "responses.sqlite3"
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


class CacheError(EdsbError):
    """The cache file cannot be opened, read or written."""


def default_cache_path() -> Path:
    """`$EDSB_CACHE_DIR/responses.sqlite3`, else the same file in the per-user cache directory."""
    directory = os.environ.get(CACHE_DIR_ENV) or platformdirs.user_cache_dir("edsb")
    return Path(directory).expanduser() / CACHE_FILE


class ResponseCache:
    """One SQLite connection. A runner's lookups and stores go through one thread of the cache's own, a batch at a
    time (`lookup`, `store`); `get` and `put` do the same work in the calling thread."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            _enable_wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"response cache {self.path} is unusable ({exc}); delete it or disable the cache") from exc
        # At hundreds of requests in flight, a thread hand-off (and an autocommit transaction) per lookup and per
        # store cost the event loop more than the request itself.
        self._batches = GroupCommit(self._handle, thread_name="edsb-cache")

    def get(self, key: str) -> ChatResponse | None:
        return _stored_response(self._handle([key])[0])

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        self._handle([_row(key, model, response)])

    async def lookup(self, key: str) -> ChatResponse | None:
        """`get`, batched with the other lookups and stores in flight."""
        return _stored_response(await self._batches.submit(key))

    async def store(self, key: str, model: str, response: ChatResponse) -> None:
        """`put`, batched with the other lookups and stores in flight; returns once committed."""
        await self._batches.submit(_row(key, model, response))

    def _handle(self, batch: list[str | tuple[str, str, str, str]]) -> list[str | None]:
        """Lookups (a key) and rows to store, in one transaction: the stored JSON for each lookup (None if missing),
        None for each store. The first answer stored for a key wins."""
        writes = any(isinstance(item, tuple) for item in batch)
        with self._lock:
            try:
                if writes:
                    self._db.execute("BEGIN IMMEDIATE")  # the write lock first: waits out other writers' busy time
                found: list[str | None] = []
                for item in batch:
                    if isinstance(item, tuple):
                        self._db.execute(
                            "INSERT OR IGNORE INTO responses (key, model, response, created_at) VALUES (?, ?, ?, ?)",
                            item,
                        )
                        found.append(None)
                    else:
                        row = self._db.execute("SELECT response FROM responses WHERE key = ?", (item,)).fetchone()
                        found.append(None if row is None else row[0])
                if writes:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise CacheError(f"response cache {self.path}: {'write' if writes else 'read'} failed ({exc})") from exc
        return found

    @property
    def batches(self) -> int:
        """Batches of lookups and stores handled (for tests and benchmarks)."""
        return self._batches.batches

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._batches.close()
        with self._lock:
            self._db.close()


def _enable_wal(db: sqlite3.Connection) -> None:
    """Switch to WAL, waiting out other processes doing the same.

    SQLite answers a journal-mode change that races another connection with SQLITE_BUSY at once, without calling
    the busy handler, so several processes opening a new cache together need this wait of their own."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005 + random.random() * 0.02)


def _row(key: str, model: str, response: ChatResponse) -> tuple[str, str, str, str]:
    stored = response.model_copy(update={"source": "model"}).model_dump_json()
    return key, model, stored, datetime.now(UTC).isoformat()


def _stored_response(text: str | None) -> ChatResponse | None:
    if text is None:
        return None
    try:
        return ChatResponse.model_validate_json(text)
    except ValidationError:
        return None  # written by an incompatible version: ask the model again


class CachedChatModel:
    """Serves repeated requests from a `ResponseCache`; a hit keeps the stored latency and says `source="cache"`."""

    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache

    def __repr__(self) -> str:
        return f"CachedChatModel({self.inner!r}, cache={str(self.cache.path)!r})"

    @property
    def identity(self) -> str:
        return self.inner.identity

    async def cached(self, request: ChatRequest) -> tuple[str, ChatResponse | None]:
        """The request's key, and its stored response marked `source="cache"` (None: not stored)."""
        key = request_key(self.identity, request)
        stored = await self.cache.lookup(key)
        return key, None if stored is None else stored.model_copy(update={"source": "cache"})

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, stored = await self.cached(request)
        if stored is not None:
            return stored
        response = await self.inner.complete(request)
        await self.cache.store(key, self.identity, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.cache.close()
