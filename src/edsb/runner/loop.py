"""The async loop over run keys: bounded concurrency, one durable result line per finished run, live progress.

A run's own model calls stay sequential inside `execute`; up to `concurrency` runs are in flight at once. The order
of lines on disk therefore varies with timing, never their content.

Progress goes to a terminal as a live bar; to anything else (a CI log, a file) as plain lines now and then, since a
live display only shows up there once it has finished.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from edsb.errors import EdsbError
from edsb.results import ErrorKind, RunKey, RunResult, RunStatus
from edsb.results.rundir import ResultStore

Execute = Callable[[RunKey], Awaitable[RunResult | None]]  # None: the run waits for a batch (`--batch`)

LOG_EVERY_S = 30.0  # a plain progress line at least this often, whether or not runs finish
LOG_STEPS = 10  # and one each time another tenth of the runs is done
WAIT_CHECK_S = 1.0  # how often the log looks whether what the first runs wait for changed (model loaded)
# This many runs in a row that could not connect to the model stop the sweep: the endpoint is down or the address is
# wrong, and every further run would only wait through its retries to fail the same way.
UNREACHABLE_STREAK = 3


class EndpointUnreachable(EdsbError):
    """Several runs in a row could not connect to the model endpoint."""


@dataclass
class LoopStats:
    total: int = 0
    done: int = 0
    passed: int = 0
    errors: int = 0
    incomplete: int = 0
    tokens: int = 0
    in_flight: int = 0
    waiting: int = 0  # runs whose request went into a batch (`--batch`): not done, not recorded this pass
    interrupted: bool = False  # stopped by Ctrl-C before every run was done
    connection_streak: int = 0  # consecutive finished runs that could not connect to the model
    error_kinds: dict[str, int] = field(default_factory=dict)
    # What the sweep waits for until its first run finishes ("loading model…"): with no run done the counts say
    # nothing, and the first runs on the embedded model take a minute.
    waiting_for: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    def note(self, result: RunResult) -> None:
        self.done += 1
        unreachable = result.error_kind is ErrorKind.TRANSPORT_UNREACHABLE
        self.connection_streak = self.connection_streak + 1 if unreachable else 0
        if result.status is RunStatus.INCOMPLETE:
            self.incomplete += 1
        elif result.status is RunStatus.ERROR:
            self.errors += 1
            kind = result.error_kind or "error"
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
        elif result.passed:
            self.passed += 1
        self.tokens += result.prompt_tokens + result.completion_tokens

    def line(self) -> str:
        if not self.done and self.waiting_for is not None:
            return f"{self.waiting_for()} | in flight {self.in_flight}"
        judged = self.done - self.incomplete
        rate = f"{self.passed / judged:.2f}" if judged else "-"
        waiting = f" | waiting for a batch {self.waiting}" if self.waiting else ""
        return (
            f"success {rate} | errors {self.errors} | incomplete {self.incomplete} | tokens {self.tokens:,} | "
            f"in flight {self.in_flight}{waiting}"
        )


class _TwoLineProgress(Progress):
    """The bar and its times on one line, the counts below it: a narrow terminal cuts the counts, not the bar. The
    counts are read at every refresh, so the runs in flight and what the sweep waits for are shown as they change."""

    stats = LoopStats()

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(self.stats.line(), no_wrap=True, overflow="ellipsis")


class _EtaColumn(ProgressColumn):
    """Time left from the mean time per finished run so far. Rich's own estimate only looks at the last 30 s, so a
    run that takes a minute (the embedded model, a slow endpoint) would show no ETA at all."""

    def render(self, task: Task) -> Text:
        elapsed, done = task.elapsed, task.completed
        if not elapsed or not done or task.total is None or done >= task.total:
            return Text("eta -:--:--", style="progress.remaining")
        return Text(f"eta {_clock(elapsed / done * (task.total - done))}", style="progress.remaining")


# The live bars on screen, for a hard stop to close before its last line (`end_progress_now`).
_ON_SCREEN: set[_LiveProgress] = set()
CLOSE_WAIT_S = 1.0  # how long a hard stop waits for the bar to close before it prints its line anyway


def end_progress_now() -> bool:
    """Close the live progress bar, if one is on screen, so that a last line prints below it and the shell's prompt
    starts a line of its own: a hard stop (a second Ctrl-C) exits without the sweep's own ending. Called from a
    signal handler, which may have interrupted a write to the terminal and so hold its lock: a helper thread closes
    the bar, and after `CLOSE_WAIT_S` it is left as it is. False if a bar is left on screen."""
    for bar in list(_ON_SCREEN):
        closing = threading.Thread(target=bar.close, daemon=True)
        closing.start()
        closing.join(CLOSE_WAIT_S)
    return not _ON_SCREEN


class _LiveProgress:
    """A rich progress bar, redrawn in place (terminals only)."""

    def __init__(self, console: Console, stats: LoopStats) -> None:
        self._progress = _TwoLineProgress(
            TextColumn("[bold]runs"),
            BarColumn(bar_width=40),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _EtaColumn(),
            console=console,
            transient=False,
            expand=False,
        )
        self._progress.stats = stats
        self._task = self._progress.add_task("runs", total=stats.total)

    def start(self, stats: LoopStats, concurrency: int) -> None:
        self._progress.start()
        _ON_SCREEN.add(self)

    def update(self, stats: LoopStats) -> None:
        self._progress.update(self._task, completed=stats.done)

    def stop(self, stats: LoopStats) -> None:
        self.update(stats)
        self.close()

    def close(self) -> None:
        """The bar as it last was, the cursor below it and shown."""
        self._progress.stop()
        _ON_SCREEN.discard(self)


class _LogProgress:
    """Plain lines for consoles that are not terminals (CI logs, `2> file`, a pipe): one when the sweep starts, one
    every tenth of the runs, one every `every_s` seconds even while no run finishes (a run on the embedded model
    takes minutes: a silent log looks like a hang), and one at the end."""

    def __init__(self, console: Console, stats: LoopStats, every_s: float = LOG_EVERY_S) -> None:
        self._console = console
        self._every_s = every_s
        self._step = max(1, -(-stats.total // LOG_STEPS))
        self._started = self._last = time.monotonic()
        self._printed_at = -1
        self._waited: str | None = None

    @staticmethod
    def _waiting(stats: LoopStats) -> str | None:
        """What the sweep waits for while no run is done (`LoopStats.waiting_for`), else None."""
        return stats.waiting_for() if stats.waiting_for is not None and not stats.done else None

    def _print(self, stats: LoopStats) -> None:
        self._waited = self._waiting(stats)
        elapsed = time.monotonic() - self._started
        eta = (
            f" | eta {_clock(elapsed / stats.done * (stats.total - stats.done))}"
            if 0 < stats.done < stats.total
            else ""
        )
        self._console.print(
            f"runs {stats.done}/{stats.total} | {stats.line()} | {_clock(elapsed)} elapsed{eta}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        self._last = time.monotonic()
        self._printed_at = stats.done

    @property
    def every_s(self) -> float:
        return self._every_s

    def start(self, stats: LoopStats, concurrency: int) -> None:
        """The first line, at once: what the first runs wait for (loading the model, the first answers), if known."""
        self._waited = self._waiting(stats)
        waiting = f"{self._waited} | " if self._waited else ""
        self._console.print(
            f"runs 0/{stats.total} | {waiting}started, {min(concurrency, stats.total)} at a time; a progress line "
            f"every {self._every_s:g} s",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        self._last = time.monotonic()

    def update(self, stats: LoopStats) -> None:
        if stats.done % self._step == 0 or time.monotonic() - self._last >= self._every_s:
            self._print(stats)

    def tick(self, stats: LoopStats) -> None:
        """The heartbeat: a line if none was printed for `every_s` seconds, or if what the first runs wait for
        changed (the model has loaded and works on the first requests)."""
        if time.monotonic() - self._last >= self._every_s or self._waiting(stats) != self._waited:
            self._print(stats)

    def stop(self, stats: LoopStats) -> None:
        if stats.done != self._printed_at:
            self._print(stats)


def _clock(seconds: float) -> str:
    minutes, whole_seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{whole_seconds:02d}"


class _NoProgress:
    def start(self, stats: LoopStats, concurrency: int) -> None:
        pass

    def update(self, stats: LoopStats) -> None:
        pass

    def stop(self, stats: LoopStats) -> None:
        pass


def _progress_for(
    console: Console, stats: LoopStats, quiet: bool, every_s: float
) -> _LiveProgress | _LogProgress | _NoProgress:
    if quiet or not stats.total:
        return _NoProgress()
    if console.is_terminal and not console.is_dumb_terminal:
        return _LiveProgress(console, stats)
    return _LogProgress(console, stats, every_s)


async def run_keys(
    keys: Sequence[RunKey],
    execute: Execute,
    store: ResultStore,
    *,
    concurrency: int,
    quiet: bool = False,
    console: Console | None = None,
    stop: asyncio.Event | None = None,
    log_every_s: float = LOG_EVERY_S,
    waiting_for: Callable[[], str] | None = None,
) -> LoopStats:
    """Execute every key once and append its record; returns the counts of this pass.

    `waiting_for` says, in the progress, what the sweep waits for until its first run finishes.

    Once `stop` is set no new run starts; the runs in flight finish and are recorded (a graceful Ctrl-C).
    An exception from `execute` (a set-up failure that no run can survive), or `EndpointUnreachable` after
    `UNREACHABLE_STREAK` connection failures in a row, cancels the runs in flight and propagates; every record
    appended before it stays on disk for the next pass.
    """
    stats = LoopStats(total=len(keys), waiting_for=waiting_for)
    progress = _progress_for(console or Console(stderr=True), stats, quiet, log_every_s)
    sweep = _Pass(keys, execute, store, stats, progress, stop)
    await sweep.run(concurrency)
    return stats


class _Pass:
    """One pass over the keys: a queue, the slots that take from it, and the result lines on their way to disk.

    A slot takes its next run without waiting for the previous line's group commit; the pass ends only once every
    line is durable, and one that cannot be written (a full disk) stops the pass.
    """

    def __init__(
        self,
        keys: Sequence[RunKey],
        execute: Execute,
        store: ResultStore,
        stats: LoopStats,
        progress: _LiveProgress | _LogProgress | _NoProgress,
        stop: asyncio.Event | None,
    ) -> None:
        self.queue: asyncio.Queue[RunKey] = asyncio.Queue()
        for key in keys:
            self.queue.put_nowait(key)
        self.execute, self.store, self.stats, self.progress, self.stop = execute, store, stats, progress, stop
        self.commits: set[asyncio.Future[None]] = set()
        self.unwritten: list[BaseException] = []
        # The pass stopped at `UNREACHABLE_STREAK`: a run that finishes after that, before the slots are cancelled,
        # is not recorded (the next pass runs it), so the directory holds exactly the streak that stopped it.
        self.halted = False

    async def run(self, concurrency: int) -> None:
        """1. start the slots (and the log's heartbeat); 2. wait for them; 3. whatever stopped them, cancel the
        rest and let every finished run reach the disk."""
        self.progress.start(self.stats, concurrency)
        slots = [asyncio.create_task(self._slot()) for _ in range(max(1, min(concurrency, self.stats.total)))]
        progress = self.progress
        beats = [asyncio.create_task(self._heartbeat(progress))] if isinstance(progress, _LogProgress) else []
        try:
            await asyncio.gather(*slots)
        finally:
            for job in slots + beats:
                job.cancel()
            await asyncio.gather(*beats, return_exceptions=True)
            await asyncio.gather(*slots, return_exceptions=True)
            try:
                await asyncio.gather(*self.commits)
            finally:
                self.progress.stop(self.stats)
        if self.unwritten:
            raise self.unwritten[0]

    async def _slot(self) -> None:
        """Run keys until the queue is empty, `stop` is set or a line could not be written."""
        while self.stop is None or not self.stop.is_set():
            if self.unwritten:
                raise self.unwritten[0]
            try:
                key = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            self.stats.in_flight += 1
            try:
                result = await self.execute(key)
            finally:
                self.stats.in_flight -= 1
            if result is None:
                self.stats.waiting += 1
                continue
            if self.halted:
                return
            self._commit(result)

    def _commit(self, result: RunResult) -> None:
        """Hand the run's line to the store, count it, and stop the pass after too many unreachable runs in a row."""
        result, line = self.store.prepare(result)  # a record that cannot be serialised becomes internal_error
        commit = asyncio.ensure_future(self.store.append(line))
        self.commits.add(commit)
        commit.add_done_callback(self._written)
        self.stats.note(result)
        self.progress.update(self.stats)
        if self.stats.connection_streak >= UNREACHABLE_STREAK:
            self.halted = True
            raise EndpointUnreachable(
                f"stopped: {self.stats.connection_streak} runs in a row could not connect to the model ({result.error})"
            )

    def _written(self, commit: asyncio.Future[None]) -> None:
        self.commits.discard(commit)
        error = None if commit.cancelled() else commit.exception()
        if error is not None:
            self.unwritten.append(error)

    async def _heartbeat(self, log: _LogProgress) -> None:
        while True:
            await asyncio.sleep(min(log.every_s / 4, WAIT_CHECK_S))
            log.tick(self.stats)
