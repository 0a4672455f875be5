"""The async loop over run keys: bounded concurrency, one fsynced result line per finished run, live progress.

A run's own model calls stay sequential inside `execute`; up to `concurrency` runs are in flight at once. The order
of lines on disk therefore varies with timing, never their content.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from edsb.runner.keys import RunKey
from edsb.runner.store import ResultStore

Execute = Callable[[RunKey], Awaitable[dict[str, Any]]]


@dataclass
class LoopStats:
    total: int = 0
    skipped: int = 0
    done: int = 0
    passed: int = 0
    errors: int = 0
    incomplete: int = 0
    tokens: int = 0
    in_flight: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def note(self, record: dict[str, Any]) -> None:
        self.done += 1
        status = record.get("status")
        if status == "incomplete":
            self.incomplete += 1
        elif status == "error":
            self.errors += 1
            kind = record.get("error_kind") or "error"
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
        elif record.get("passed"):
            self.passed += 1
        self.tokens += int(record.get("prompt_tokens") or 0) + int(record.get("completion_tokens") or 0)

    def line(self) -> str:
        judged = self.done - self.incomplete
        rate = f"{self.passed / judged:.2f}" if judged else "-"
        return (
            f"success {rate} | errors {self.errors} | incomplete {self.incomplete} | tokens {self.tokens:,} | "
            f"in flight {self.in_flight}"
        )


async def run_keys(
    keys: Sequence[RunKey],
    execute: Execute,
    store: ResultStore,
    *,
    concurrency: int,
    quiet: bool = False,
    console: Console | None = None,
) -> LoopStats:
    """Execute every key once and append its record; returns the counts of this pass."""
    stats = LoopStats(total=len(keys))
    queue: asyncio.Queue[RunKey] = asyncio.Queue()
    for key in keys:
        queue.put_nowait(key)
    progress = Progress(
        TextColumn("[bold]runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        disable=quiet,
        transient=False,
    )
    task = progress.add_task("runs", total=len(keys), status=stats.line())

    async def worker() -> None:
        while True:
            try:
                key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            stats.in_flight += 1
            try:
                record = await execute(key)
            finally:
                stats.in_flight -= 1
            store.append(record)
            stats.note(record)
            progress.update(task, advance=1, status=stats.line())

    with progress:
        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(keys))))]
        try:
            await asyncio.gather(*workers)
        finally:
            for job in workers:
                job.cancel()
    return stats
