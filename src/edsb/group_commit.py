"""Group commit: coroutines hand items to one thread of their own, which handles them a batch at a time.

Items submitted while a batch is being handled wait for the next one; the thread then handles the whole batch in one
go (one write and one fsync for result lines, one SQLite transaction for the response cache) and each coroutine gets
its own result. With hundreds of runs in flight that is one thread hand-off per batch instead of one per item, and
the event loop never queues for the GIL behind a crowd of threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class GroupCommit(Generic[Item, Result]):
    """`await commit.submit(item)` returns `handle(batch)[i]` for the item's place `i` in its batch. If `handle`
    raises, every item of that batch raises the same exception (a full disk fails every line of the batch).

    Used from one event loop at a time (one after another is fine: each `asyncio.run` gets its own flushing task)."""

    def __init__(self, handle: Callable[[list[Item]], list[Result]], thread_name: str) -> None:
        self._handle = handle
        self._thread_name = thread_name
        self._thread: ThreadPoolExecutor | None = None  # started on first use, again after `close`
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.batches = 0  # batches handled, for tests and benchmarks

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix=self._thread_name)
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                results = await loop.run_in_executor(self._thread, self._handle, [item for item, _ in batch])
                if len(results) != len(batch):
                    raise ValueError(f"the batch handler gave {len(results)} results for {len(batch)} items")
            except asyncio.CancelledError:  # the loop is shutting down: nothing of it may be handled by a later loop
                waiting, self._pending = batch + self._pending, []
                for _, future in waiting:
                    future.cancel()
                raise
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self.batches += 1
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def close(self) -> None:
        """Stop the thread once the batch in hand, if any, is done (a later `submit` starts it again)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=True)
