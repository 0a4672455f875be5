"""The loop: bounded concurrency, one appended record per key, progress for terminals, CI logs and quiet runs."""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress

from edsb.llm import build_model
from edsb.results import ErrorKind, RunKey, RunResult, RunStatus
from edsb.results.rundir import DiskFullError, ResultStore
from edsb.runner.loop import UNREACHABLE_STREAK, EndpointUnreachable, Execute, LoopStats, _EtaColumn, run_keys
from edsb.runner.run import waiting_for
from tests.support.run_dir import records_by_key

KEYS = [RunKey("ours", case, 0, 0) for case in range(20)]


def _record(key: RunKey, **changes: Any) -> RunResult:
    status = (RunStatus.PASSED, RunStatus.FAILED, RunStatus.ERROR, RunStatus.INCOMPLETE)[key.case % 4]
    fields: dict[str, Any] = {
        "key": key.id,
        "variant": key.variant,
        "case": key.case,
        "distraction": key.distraction,
        "repeat": key.repeat,
        "status": status,
        "error_kind": ErrorKind.CODE_RUNTIME if status is RunStatus.ERROR else None,
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "sandbox": "exact",
    }
    return RunResult(**(fields | changes))


class Recorder:
    """An `execute` that sleeps a little and notes how many runs overlap."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    async def __call__(self, key: RunKey) -> RunResult:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.002 * (key.case % 3))
        self.active -= 1
        return _record(key)


def _run(tmp_path: Path, console: Console | None, *, quiet: bool = False, concurrency: int = 4) -> LoopStats:
    tmp_path.mkdir(exist_ok=True)
    store = ResultStore(tmp_path)
    store.open()
    try:
        return asyncio.run(run_keys(KEYS, Recorder(), store, concurrency=concurrency, quiet=quiet, console=console))
    finally:
        store.close()


@pytest.mark.parametrize("concurrency", [1, 3, 50])
def test_at_most_concurrency_runs_in_flight_and_each_key_once(tmp_path: Path, concurrency: int) -> None:
    execute = Recorder()
    store = ResultStore(tmp_path)
    store.open()
    stats = asyncio.run(run_keys(KEYS, execute, store, concurrency=concurrency, quiet=True))
    store.close()
    assert execute.peak == min(concurrency, len(KEYS))
    assert sorted(records_by_key(tmp_path)) == sorted(key.id for key in KEYS)
    assert (stats.done, stats.passed, stats.errors, stats.incomplete) == (20, 5, 5, 5)
    assert stats.error_kinds == {"code_runtime": 5} and stats.tokens == 220
    assert stats.line().startswith("success 0.33 | errors 5 | incomplete 5")  # 5 passes of 15 judged runs


def test_non_terminal_console_gets_plain_progress_lines(tmp_path: Path) -> None:
    log = io.StringIO()
    _run(tmp_path, Console(file=log, force_terminal=False, width=80))
    lines = log.getvalue().splitlines()
    assert "\x1b" not in log.getvalue()  # no cursor movement or colour in a CI log
    assert lines[0] == "runs 0/20 | started, 4 at a time; a progress line every 30 s"
    assert lines[-1].startswith("runs 20/20 | success 0.33 | errors 5 | incomplete 5 | tokens 220")
    assert [line.split()[1] for line in lines[1:]] == [f"{n}/20" for n in range(2, 21, 2)]  # every tenth
    assert all(len(line) > 80 for line in lines[1:])  # one line each, not wrapped at the console width


def test_a_log_hears_from_a_sweep_whose_runs_take_long(tmp_path: Path) -> None:
    """The first line comes at the start and more follow while no run has finished yet (a run on the embedded
    model takes minutes): the run waits until the log shows two heartbeats after the start line."""
    log = io.StringIO()
    keys = KEYS[:2]

    async def slow(key: RunKey) -> RunResult:
        while log.getvalue().count(f"runs 0/{len(keys)} | success") < 2:
            await asyncio.sleep(0.005)
        return _record(key)

    async def sweep() -> LoopStats:
        return await asyncio.wait_for(
            run_keys(keys, slow, store, concurrency=2, console=Console(file=log), log_every_s=0.02), timeout=60
        )

    store = ResultStore(tmp_path)
    store.open()
    try:
        stats = asyncio.run(sweep())
    finally:
        store.close()
    lines = log.getvalue().splitlines()
    assert stats.done == 2
    assert lines[0] == "runs 0/2 | started, 2 at a time; a progress line every 0.02 s"
    assert lines[1].startswith("runs 0/2 | success - | errors 0 | incomplete 0 | tokens 0 | in flight 2")
    assert lines[-1].startswith("runs 2/2 |")


def _logged_sweep(tmp_path: Path, keys: list[RunKey], execute: Execute, log: io.StringIO, **options: Any) -> None:
    """`run_keys` two at a time into a results file under `tmp_path`, its plain progress lines into `log`."""
    store = ResultStore(tmp_path)
    store.open()
    try:
        sweep = run_keys(keys, execute, store, concurrency=2, console=Console(file=log), **options)
        asyncio.run(asyncio.wait_for(sweep, timeout=60))
    finally:
        store.close()


def test_until_the_first_run_finishes_the_progress_says_what_it_waits_for(tmp_path: Path) -> None:
    """The embedded model's first runs take a minute: the log says why instead of empty counts."""
    log = io.StringIO()
    keys = KEYS[:2]

    async def slow(key: RunKey) -> RunResult:
        while "loading model… | in flight 2" not in log.getvalue():
            await asyncio.sleep(0.005)
        return _record(key)

    _logged_sweep(tmp_path, keys, slow, log, log_every_s=0.02, waiting_for=lambda: "loading model…")
    lines = log.getvalue().splitlines()
    assert lines[1].startswith("runs 0/2 | loading model… | in flight 2 | ")
    assert lines[-1].startswith("runs 2/2 | success ")  # the counts, once runs are done


def test_the_first_line_says_what_it_waits_for_and_a_change_gets_a_line_at_once(tmp_path: Path) -> None:
    """The start line names what the first runs wait for; when the model has loaded, a line says so without waiting
    for the heartbeat (an hour here, so no line can come from it)."""
    log = io.StringIO()
    keys = KEYS[:2]
    loaded = False

    def waiting() -> str:
        return "model working on the first requests…" if loaded else "loading model…"

    async def slow(key: RunKey) -> RunResult:
        nonlocal loaded
        loaded = True
        while "| model working on the first requests… | in flight" not in log.getvalue():
            await asyncio.sleep(0.005)
        return _record(key)

    _logged_sweep(tmp_path, keys, slow, log, log_every_s=3600, waiting_for=waiting)
    lines = log.getvalue().splitlines()
    assert lines[0] == "runs 0/2 | loading model… | started, 2 at a time; a progress line every 3600 s"
    assert lines[1].startswith("runs 0/2 | model working on the first requests… | in flight 2 | ")
    assert lines[-1].startswith("runs 2/2 | success ")


def test_the_live_bar_shows_what_it_waits_for_and_the_runs_in_flight(tmp_path: Path) -> None:
    """Redrawn while nothing finishes: the note and the runs in flight appear without a run being done."""
    log = io.StringIO()
    keys = KEYS[:3]
    note = iter(["loading model…"] * 3)

    def waiting() -> str:
        return next(note, "model working on the first requests…")

    async def slow(key: RunKey) -> RunResult:
        while "model working on the first requests… | in flight 3" not in log.getvalue():
            await asyncio.sleep(0.01)
        return _record(key)

    store = ResultStore(tmp_path)
    store.open()
    try:
        sweep = run_keys(
            keys, slow, store, concurrency=3, console=Console(file=log, force_terminal=True, width=100),
            waiting_for=waiting,
        )  # fmt: skip
        asyncio.run(asyncio.wait_for(sweep, timeout=60))
    finally:
        store.close()
    drawn = log.getvalue()
    assert "loading model… | in flight" in drawn and "0/3" in drawn
    final = drawn.rsplit("\x1b[1A\x1b[2K", 1)[-1].split("\n")
    assert "3/3" in final[0] and final[1].startswith("success ")


def test_quiet_prints_nothing(tmp_path: Path) -> None:
    for terminal in (False, True):
        log = io.StringIO()
        _run(tmp_path / str(terminal), Console(file=log, force_terminal=terminal), quiet=True)
        assert log.getvalue() == ""


@pytest.mark.parametrize("width", [50, 160])
def test_terminal_console_gets_a_live_bar(tmp_path: Path, width: int) -> None:
    log = io.StringIO()
    _run(tmp_path, Console(file=log, force_terminal=True, width=width))
    final = log.getvalue().rsplit("\x1b[1A\x1b[2K", 1)[-1].split("\n")  # the last redraw: bar line, counts line
    assert "20/20" in final[0] and "\x1b" in log.getvalue()
    assert final[1].startswith("success 0.33 | errors 5")  # on a narrow terminal cut short, the bar intact


def test_a_failure_that_is_no_run_result_stops_the_loop_and_keeps_what_was_written(tmp_path: Path) -> None:
    async def execute(key: RunKey) -> RunResult:
        await asyncio.sleep(0.001 * key.case)
        if key.case == 5:
            raise RuntimeError("set-up failed")
        return _record(key)

    store = ResultStore(tmp_path)
    store.open()
    with pytest.raises(RuntimeError, match="set-up failed"):
        asyncio.run(run_keys(KEYS, execute, store, concurrency=2, quiet=True))
    store.close()
    written = records_by_key(tmp_path)
    assert 0 < len(written) < len(KEYS) and "ours/tc05-d0-r0" not in written
    assert all(json.dumps(record) for record in written.values())


def test_eta_comes_from_the_mean_time_per_finished_run() -> None:
    """Runs a minute apart still get an ETA (rich's own estimate forgets samples older than 30 s)."""
    clock = [0.0]
    progress = Progress(_EtaColumn(), get_time=lambda: clock[0])
    task = progress.add_task("runs", total=10)
    assert _EtaColumn()(progress.tasks[0]).plain == "eta -:--:--"  # nothing finished yet: no estimate
    clock[0] = 120.0
    progress.update(task, completed=2)
    assert _EtaColumn()(progress.tasks[0]).plain == "eta 0:08:00"  # 60 s per run, 8 to go


def test_stop_lets_runs_in_flight_finish_and_starts_no_new_one(tmp_path: Path) -> None:
    stop = asyncio.Event()

    async def execute(key: RunKey) -> RunResult:
        await asyncio.sleep(0.001)
        stop.set()  # as if Ctrl-C came while the first three runs were in flight
        await asyncio.sleep(0.01)
        return _record(key)

    store = ResultStore(tmp_path)
    store.open()
    stats = asyncio.run(run_keys(KEYS, execute, store, concurrency=3, quiet=True, stop=stop))
    store.close()
    assert stats.done == 3 and sorted(records_by_key(tmp_path)) == sorted(key.id for key in KEYS[:3])


def test_connection_failures_in_a_row_stop_the_loop(tmp_path: Path) -> None:
    async def execute(key: RunKey) -> RunResult:
        await asyncio.sleep(0)
        if key.case == 1:  # one success resets the streak
            return _record(key, status=RunStatus.PASSED, error_kind=None)
        return _record(key, status=RunStatus.INCOMPLETE, error_kind=ErrorKind.TRANSPORT_UNREACHABLE, error="refused")

    store = ResultStore(tmp_path)
    store.open()
    with pytest.raises(EndpointUnreachable, match=rf"{UNREACHABLE_STREAK} runs in a row could not connect"):
        asyncio.run(run_keys(KEYS, execute, store, concurrency=1, quiet=True))
    store.close()
    assert len(records_by_key(tmp_path)) == 2 + UNREACHABLE_STREAK


def test_a_run_finishing_beside_the_one_that_ends_the_streak_is_not_recorded(tmp_path: Path) -> None:
    """Two slots in lockstep: the run that completes the streak and its neighbour finish in the same turn of the
    loop. The neighbour is left for the next pass, so the directory holds exactly the streak that stopped it."""

    async def execute(key: RunKey) -> RunResult:
        await asyncio.sleep(0)  # one turn of the loop: both slots resume in the same turn
        return _record(key, status=RunStatus.INCOMPLETE, error_kind=ErrorKind.TRANSPORT_UNREACHABLE, error="refused")

    store = ResultStore(tmp_path)
    store.open()
    with pytest.raises(EndpointUnreachable):
        asyncio.run(run_keys(KEYS, execute, store, concurrency=2, quiet=True))
    store.close()
    assert len(records_by_key(tmp_path)) == UNREACHABLE_STREAK


def test_a_line_that_cannot_be_written_stops_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot takes its next run while the previous line is still being written; a line that cannot be written
    (a full disk) still stops the pass soon, with the disk's error, instead of paying for every remaining run."""
    executed: list[int] = []

    async def execute(key: RunKey) -> RunResult:
        executed.append(key.case)
        await asyncio.sleep(0.005)
        return _record(key)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    store = ResultStore(tmp_path)
    store.open()
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match=r"results\.jsonl: no space left on device"):  # naming the file
        asyncio.run(run_keys(KEYS, execute, store, concurrency=2, quiet=True))
    store.close()
    assert len(executed) <= 6  # the runs in flight when the failure was known, not all twenty


def test_the_embedded_model_is_waited_for_as_loading_until_its_weights_are_in() -> None:
    local = build_model("local", cache=True)  # the response cache wraps it, as in a run
    assert waiting_for(local)() == "loading model…"
    remote = build_model("openai:some-model", base_url="http://127.0.0.1:9/v1", cache=False)
    assert waiting_for(remote)() == "waiting for the first answers…"
