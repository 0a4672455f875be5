"""`kill -9` at any moment, then the same command again: the directory ends up as if nothing had happened."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.llm import read_transcripts
from edsb.results.rundir import RESULTS_FILE
from edsb.runner.run import run_benchmark
from tests.support.edsb_cli import child_env, scripted_config, scripted_run_args, start_edsb, wait_until
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import content, raw_lines, records_by_key
from tests.support.scripted_planner import ScriptedPlanner

SELECTION = ("--cases", "0,13,60", "--repeats", "2", "--concurrency", "2", "--no-cache", "--quiet")
KEYS = 14  # cases 0 and 13 at levels 0-2, case 60 at level 0; two repeats each


@pytest.fixture
def slow_server(benchmark: Benchmark) -> OpenAIServer:
    # Kills must land mid-pass: about 21 requests two at a time take over 2 s at this latency, so a kill 0.2-0.9 s
    # after a pass's first request cuts it short however fast edsb's own part is (at 0.1 s, once edsb got faster,
    # resumed passes sometimes finished first).
    with OpenAIServer(ScriptedPlanner(benchmark, delay_s=0.2)) as server:
        yield server


@pytest.fixture
def uninterrupted(slow_server: OpenAIServer, tmp_path: Path) -> dict[str, dict]:
    """The records of the same selection run in one go."""
    config = scripted_config(slow_server.base_url, cases=[0, 13, 60], repeats=2, concurrency=2)
    run_benchmark(config, tmp_path / "uninterrupted", quiet=True)
    records = records_by_key(tmp_path / "uninterrupted")
    assert len(records) == KEYS
    return records


def _start(server: OpenAIServer, out: Path, cache: Path, *options: str) -> subprocess.Popen[bytes]:
    return start_edsb(
        scripted_run_args(server.base_url, out, *SELECTION, *options),
        env=child_env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its sandbox workers share its process group, so they can be reaped below
    )


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run itself (nothing gets to clean up), then reap what it left behind."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.stderr is not None:
        process.stderr.close()


def _finish(server: OpenAIServer, out: Path, cache: Path) -> str:
    process = _start(server, out, cache)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    return stderr.decode()


def _assert_same_as(out: Path, uninterrupted: dict[str, dict]) -> None:
    records = records_by_key(out)  # no torn line, no key twice
    assert sorted(records) == sorted(uninterrupted)
    for key, record in records.items():
        assert content(record) == content(uninterrupted[key]), key
    for record in read_transcripts(out):  # transcripts of killed passes stay readable
        assert record.run


def test_kill_after_k_results_then_resume(
    slow_server: OpenAIServer, uninterrupted: dict[str, dict], tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    for k in (1, 5, 10):
        process = _start(slow_server, out, tmp_path / "cache")
        wait_until(lambda k=k: len(raw_lines(out)) >= k, process, f"{k} results were written")
        _kill(process)
        lines = raw_lines(out)
        assert k <= len(lines) < KEYS, "the kill must land mid-run"
        if k == 5:  # what a kill in the middle of a write leaves: part of a line, here of a key already done
            with (out / RESULTS_FILE).open("ab") as handle:
                handle.write(lines[-1][: len(lines[-1]) // 2])
    stderr = _finish(slow_server, out, tmp_path / "cache")
    assert f"{KEYS} runs planned" in stderr
    _assert_same_as(out, uninterrupted)


def test_kill_at_random_times_then_resume(
    slow_server: OpenAIServer, uninterrupted: dict[str, dict], tmp_path: Path
) -> None:
    """Random moments after each pass has started talking to the model: mid-request, mid-sandbox, mid-write."""
    out = tmp_path / "killed"
    rng = random.Random(20250607)
    cut_short = 0
    for _ in range(3):
        asked = len(slow_server.chat_requests)
        process = _start(slow_server, out, tmp_path / "cache")

        def reached(asked: int = asked, process: subprocess.Popen[bytes] = process) -> bool:
            return len(slow_server.chat_requests) > asked or process.poll() is not None  # or it had nothing to do

        wait_until(reached, process, "the run reached the model")
        time.sleep(rng.uniform(0.2, 0.9))
        cut_short += process.poll() is None
        _kill(process)
    assert cut_short >= 2, "most kills must land before the pass ends"
    _finish(slow_server, out, tmp_path / "cache")
    _assert_same_as(out, uninterrupted)


def test_kill_during_group_commit_then_resume(
    slow_server: OpenAIServer, uninterrupted: dict[str, dict], tmp_path: Path
) -> None:
    """Seven runs in flight finish close together, so their lines land as batches (one write, one fsync each). A
    kill in the middle of a batch's write leaves its first lines whole and the next one torn: the whole ones are
    kept, the torn one and every run whose line never landed run again, and no key appears twice."""
    out = tmp_path / "batched"
    process = _start(slow_server, out, tmp_path / "cache", "--concurrency", "7")
    wait_until(lambda: len(raw_lines(out)) >= 1, process, "the first batch was written")
    _kill(process)
    written = records_by_key(out)
    missing = [key for key in sorted(uninterrupted) if key not in written]
    assert len(missing) >= 3, "the kill must land before the last batches"
    by_key = {json.loads(line)["key"]: line for line in raw_lines(tmp_path / "uninterrupted")}
    torn_batch = by_key[missing[0]] + by_key[missing[1]] + by_key[missing[2]][:40]
    with (out / RESULTS_FILE).open("ab") as handle:
        handle.write(torn_batch)
    stderr = _finish(slow_server, out, tmp_path / "cache")
    kept = len(written) + 2
    assert f"{KEYS} runs planned, {kept} already done, {KEYS - kept} executed" in stderr
    _assert_same_as(out, uninterrupted)


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(
    slow_server: OpenAIServer, uninterrupted: dict[str, dict], tmp_path: Path
) -> None:
    out = tmp_path / "interrupted"
    process = _start(slow_server, out, tmp_path / "cache")
    wait_until(lambda: len(raw_lines(out)) >= 3, process, "3 results were written")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    kept = len(raw_lines(out))
    assert f"interrupted: {kept} of {KEYS} results kept in {out}; rerun the same command to resume" in stderr.decode()
    assert 3 <= kept < KEYS
    _finish(slow_server, out, tmp_path / "cache")
    _assert_same_as(out, uninterrupted)
