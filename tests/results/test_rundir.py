"""The run directory: results.jsonl as whole fsynced lines, a torn tail repaired, incomplete runs dropped for retry,
corruption refused; the typed record round-trips."""

from __future__ import annotations

import asyncio
import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from edsb.errors import EdsbError
from edsb.results import ErrorKind, RunKey, RunResult, RunStatus
from edsb.results.rundir import (
    RESULTS_FILE,
    DiskFullError,
    ResultStore,
    RunDirectory,
    load_results,
    open_appending,
    read_results,
)
from edsb.runner.keys import expand_keys
from tests.support.run_dir import raw_lines
from tests.support.small_disk import PAGE, fill, small_disk


def _record(case: int, status: str = "passed", **extra: Any) -> RunResult:
    key = RunKey("ours", case, 0, 0)
    return RunResult(
        key=key.id,
        variant="ours",
        case=case,
        distraction=0,
        status=RunStatus(status),
        plan={"Ann": "é"},
        sandbox="exact",
        **extra,
    )


def encode(result: RunResult) -> bytes:
    return result.to_line()


def commit(store: ResultStore, result: RunResult) -> None:
    """One record through the store's group commit, as the run loop writes it."""
    asyncio.run(store.commit(result))


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the size of the file at each fsync (the bytes made durable)."""
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_each_append_is_one_whole_line_flushed_and_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ResultStore(tmp_path)
    assert store.open() == {}
    synced = record_fsyncs(monkeypatch)
    for case in range(3):
        commit(store, _record(case))
        # On disk (not in a buffer) and synced before append returns: the size fsync saw is the whole file so far.
        assert synced[-1] == (tmp_path / RESULTS_FILE).stat().st_size
    store.close()
    assert len(synced) == 3
    assert [line.endswith(b"\n") and line.count(b"\n") == 1 for line in raw_lines(tmp_path)] == [True] * 3
    assert [r.case for r in load_results(tmp_path)] == [0, 1, 2]


def test_a_torn_tail_is_cut_off_when_the_directory_is_reopened(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    whole = encode(_record(0)) + encode(_record(1))
    path.write_bytes(whole + encode(_record(2))[:17])
    records, good = read_results(path)
    assert [r.case for r in records] == [0, 1] and good == len(whole)

    store = ResultStore(tmp_path)
    assert sorted(store.open()) == [_record(0).key, _record(1).key]
    commit(store, _record(2))
    store.close()
    assert path.read_bytes() == whole + encode(_record(2))


def test_a_whole_line_without_its_newline_counts_as_torn(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(encode(_record(0)) + encode(_record(1))[:-1])
    assert list(ResultStore(tmp_path).open()) == [_record(0).key]


def test_incomplete_runs_are_dropped_on_reopen_so_the_next_pass_retries_them(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(encode(_record(0)) + encode(_record(1, "incomplete")) + encode(_record(2, "error")))
    store = ResultStore(tmp_path)
    finished = store.open()
    store.close()
    assert sorted(r.case for r in finished.values()) == [0, 2]
    assert [r.case for r in read_results(path)[0]] == [0, 2]  # the file holds no key the next pass will append


def test_an_untouched_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(encode(_record(0)))
    before = path.stat().st_ino
    ResultStore(tmp_path).open()
    assert path.stat().st_ino == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (encode(_record(0)) + b"{not json\n" + encode(_record(1)), "corrupt line 2"),
        (encode(_record(0)) + b"{not json\n", "corrupt line 2"),  # it has its newline: not a torn write
        (encode(_record(0)) + b"\xff\xfe\n", "corrupt line 2"),
        (encode(_record(0)) + b'["a list"]\n', "line 2 is not a run record"),
        (b'{"no": "key"}\n', "line 1 is not a run record"),
        (
            b'{"key": "ours/tc01-d0-r0", "variant": "ours", "case": "1", "distraction": 0, "status": "passed"}\n',
            "record 1: case: Input should be a valid integer",
        ),
        (encode(_record(0))[:-2] + b', "status": "maybe"}\n', "record 1: status: Input should be"),
    ],
)
def test_corruption_other_than_a_torn_tail_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(content)
    with pytest.raises(EdsbError, match=message):
        ResultStore(tmp_path).open()
    assert path.read_bytes() == content  # left for the user to inspect


def test_keys_follow_the_reference_loop_order_and_round_trip(benchmark: Any) -> None:
    keys = expand_keys(["ours", "direct"], [60, 2, 13, 1], [2, 0], 2, benchmark.cases)
    assert [k.id for k in keys[:6]] == [
        "ours/tc13-d0-r0",  # House first
        "ours/tc13-d0-r1",
        "ours/tc13-d2-r0",
        "ours/tc13-d2-r1",
        "ours/tc60-d0-r0",  # PI cases have level 0 only
        "ours/tc60-d0-r1",
    ]
    assert [k.case for k in keys[6:14]] == [1] * 4 + [2] * 4  # then Office, then Restaurant
    assert len(keys) == 2 * 14 and keys[14].variant == "direct"
    assert all(RunKey.from_id(k.id) == k for k in keys)


def test_a_record_round_trips_through_its_line_and_derives_passed_from_status() -> None:
    result = _record(3, "error", error_kind=ErrorKind.CODE_RUNTIME, error="code_runtime: KeyError: 'x'")
    line = json.loads(result.to_line())
    assert line["passed"] is False and line["status"] == "error" and line["error_kind"] == "code_runtime"
    assert RunResult.model_validate(line) == result
    assert _record(1).passed and not _record(1, "failed").passed and not _record(1, "incomplete").is_judged
    # A line written by another edsb version: unknown fields are ignored, a stale `passed` cannot contradict status.
    assert RunResult.model_validate({**line, "passed": True, "future_field": 1}) == result


def test_a_run_directory_finds_one_run_and_names_what_it_holds(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.open()
    for case in (1, 2):
        commit(store, _record(case))
    store.close()
    run = RunDirectory.open(tmp_path)
    assert run.find(2, 0, 0).case == 2 and [r.case for r in run.results] == [1, 2]
    with pytest.raises(EdsbError, match=r"no run of case 3 at level 0, repeat 0, variant 'ours' \(variants: ours\)"):
        run.find(3, 0, 0)
    with pytest.raises(EdsbError, match="not a run directory"):
        RunDirectory.open(tmp_path / "nowhere")


def test_runs_finishing_together_share_one_write_and_one_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group commit: lines committed while no batch is being written land together, whole, with a single fsync,
    and each commit returns only once its line is on disk."""
    store = ResultStore(tmp_path)
    store.open()
    synced = record_fsyncs(monkeypatch)

    async def finish_together() -> None:
        await asyncio.gather(*(store.commit(_record(case)) for case in range(20)))
        assert synced == [(tmp_path / RESULTS_FILE).stat().st_size]  # already synced when the commits return
        await store.commit(_record(20))  # a later run gets its own batch

    asyncio.run(finish_together())
    store.close()
    assert len(synced) == 2 and store.fsyncs == 2
    lines = raw_lines(tmp_path)
    assert len(lines) == 21 and all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert sorted(r.case for r in load_results(tmp_path)) == list(range(21))


def test_a_failed_batch_write_reaches_every_run_of_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fails the fsync (full, gone): every commit of the batch raises it, none hangs or passes."""
    store = ResultStore(tmp_path)
    store.open()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)

    async def commit_three() -> list[BaseException | None]:
        return await asyncio.gather(*(store.commit(_record(case)) for case in range(3)), return_exceptions=True)

    outcomes = asyncio.run(commit_three())
    store.close()
    assert [type(outcome) for outcome in outcomes] == [DiskFullError] * 3, outcomes  # naming the file
    assert all(str(outcome).startswith(str(tmp_path / RESULTS_FILE)) for outcome in outcomes)


def test_what_belongs_to_a_run_is_written_before_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`before_line` (a run's transcript) runs when the run is committed, before its record is written and fsynced;
    `open_appending` cuts a torn tail left by a killed write first."""
    transcript = tmp_path / "transcripts" / "requests.jsonl"
    transcript.parent.mkdir()
    transcript.write_bytes(b'{"earlier": 1}\n{"cut sho')

    def before_line(result: RunResult) -> None:
        fd = open_appending(transcript)
        try:
            os.write(fd, f'{{"run": "{result.run_key.file_stem}"}}\n'.encode())
        finally:
            os.close(fd)

    store = ResultStore(tmp_path, before_line=before_line)
    store.open()
    order: list[str] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd: int, data: bytes) -> int:
        order.append("write " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        order.append("fsync " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)

    async def finish_together() -> None:
        await asyncio.gather(*(store.commit(_record(case)) for case in (1, 2)))

    asyncio.run(finish_together())
    store.close()
    transcripts, batch = ["write requests.jsonl"] * 2, [f"write {RESULTS_FILE}", f"fsync {RESULTS_FILE}"]
    assert order == transcripts + batch  # both transcripts first, then the two records as one batch
    assert transcript.read_bytes() == b'{"earlier": 1}\n{"run": "ours__tc01-d0-r0"}\n{"run": "ours__tc02-d0-r0"}\n'
    assert sorted(r.case for r in load_results(tmp_path)) == [1, 2]


def test_a_batch_the_full_disk_refuses_is_cut_off_and_names_the_file(tmp_path: Path) -> None:
    """On a real full disk (tmpfs): the error names results.jsonl and says the command resumes; the file keeps its
    whole lines (a write the disk took half of is cut off again), and appends go on once there is space."""
    with small_disk(tmp_path / "disk") as disk:
        store = ResultStore(disk)
        store.open()
        commit(store, _record(0))
        filler = fill(disk, leave=PAGE)  # the next batch fits in part: a short write, then ENOSPC

        async def one_batch() -> None:
            await asyncio.gather(*(store.commit(_record(c, status="failed", reason="x" * PAGE)) for c in (1, 2)))

        with pytest.raises(DiskFullError, match=r"results\.jsonl: no space left on device; nothing already written"):
            asyncio.run(one_batch())
        assert raw_lines(disk) == [encode(_record(0))]
        filler.unlink()
        commit(store, _record(3))
        store.close()
        assert [r.case for r in load_results(disk)] == [0, 3]
