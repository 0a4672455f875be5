"""A persistent response cache in SQLite, shared by every run, process and thread on the machine.

Keys are `request_key` hashes, so the model identity, the server, the messages, every sampling setting and the
caller's sample index all take part: a second run of the same repeat is answered from disk, another repeat is not.
WAL journaling plus a busy timeout let several processes write at once; the first answer stored for a key wins.
Only completions are stored; transport failures are never cached.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import platformdirs
from pydantic import ValidationError

from edsb.errors import EdsbError
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
    """One SQLite connection, used from worker threads one at a time."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"response cache {self.path} is unusable ({exc}); delete it or disable the cache") from exc

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            try:
                row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise CacheError(f"response cache {self.path}: read failed ({exc})") from exc
        if row is None:
            return None
        try:
            return ChatResponse.model_validate_json(row[0])
        except ValidationError:
            return None  # written by an incompatible version: ask the model again

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        stored = response.model_copy(update={"source": "model"}).model_dump_json()
        now = datetime.now(UTC).isoformat()
        with self._lock:
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO responses (key, model, response, created_at) VALUES (?, ?, ?, ?)",
                    (key, model, stored, now),
                )
            except sqlite3.Error as exc:
                raise CacheError(f"response cache {self.path}: write failed ({exc})") from exc

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


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

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key = request_key(self.identity, request)
        stored = await asyncio.to_thread(self.cache.get, key)
        if stored is not None:
            return stored.model_copy(update={"source": "cache"})
        response = await self.inner.complete(request)
        await asyncio.to_thread(self.cache.put, key, self.identity, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.cache.close()
