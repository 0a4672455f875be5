"""Model code never outlives `edsb run`: however edsb is stopped (SIGTERM from a process manager, SIGHUP from a
closed terminal, a second Ctrl-C, or `kill -9`), no process of its sandbox is left running, and a directory stopped
by SIGTERM resumes with the same command.

The scripted model hands the Event Parser programs that hold memory and then sleep or spin for far longer than the
tests wait (`--code-timeout 120`): "model code is running" is two processes under edsb holding that memory, read
from /proc, and "no process remains" is edsb and every process that was under it when it was stopped gone or
zombies."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from edsb.sandbox.limits import SANDBOXES, SandboxName
from tests.support.edsb_cli import HANG_GUARD_S, child_env, edsb_child, start_edsb, wait_until
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.openai_server import OpenAIServer
from tests.support.processes import Process, descendants, poll, process, resident_bytes, running
from tests.support.run_dir import raw_lines, read_results, records_by_key
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, run_args

HOLD = 128 << 20  # bytes each program fills before it waits: far above what an idle sandbox process holds
SLEEP = f"hold = np.ones({HOLD // 8})\nimport time\ntime.sleep(10 ** 6)"  # `time` is refused under restricted
SPIN = f"hold = np.ones({HOLD // 8})\nwhile True:\n    pass"
# Time from the stop to the end of the last sandbox process: a safety net against a loaded host. Without the fix the
# processes live for the whole --code-timeout (sleeping ones for ever), so this still tells the two apart.
GONE_WITHIN_S = 5.0
STOPS = ("SIGTERM", "SIGHUP", "second SIGINT", "SIGKILL")
EXIT_STATUS = {"SIGTERM": 143, "SIGHUP": 129, "second SIGINT": 130, "SIGKILL": -signal.SIGKILL}
Popen = subprocess.Popen[bytes]


def _sandbox(sandbox: SandboxName) -> SandboxName:
    if sandbox == "exact":
        require_kernel_sandbox()
    return sandbox


def _start(server: OpenAIServer, out: Path, tmp_path: Path, repeats: int, concurrency: int, sandbox: str) -> Popen:
    args = run_args(
        server.base_url, out, repeats, "--concurrency", str(concurrency), "--code-timeout", "120", sandbox=sandbox
    )
    return start_edsb(args, env=child_env(tmp_path / "cache"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _holding(edsb: Popen) -> int:
    """How many processes under edsb hold a program's memory: each is running model code."""
    return sum(resident_bytes(pid) >= HOLD for pid, _ in descendants(edsb.pid))


def _started(pid: int) -> int:
    found = process(pid)
    assert found is not None, "edsb ended before it was stopped"
    return found[1]


def _read_until(edsb: Popen, text: str) -> str:
    """edsb's stderr up to and including `text` (a hang guard bounds the wait)."""
    assert edsb.stderr is not None
    seen = b""
    deadline = time.monotonic() + HANG_GUARD_S
    while text.encode() not in seen:
        assert time.monotonic() < deadline, f"hung waiting for {text!r}: {seen.decode()}"
        if select.select([edsb.stderr], [], [], 1)[0]:
            chunk = os.read(edsb.stderr.fileno(), 4096)
            assert chunk, f"edsb closed stderr before {text!r}: {seen.decode()}"
            seen += chunk
    return seen.decode()


def _stop(edsb: Popen, how: str) -> str:
    """Stop edsb as `how` says; what it wrote to stderr meanwhile."""
    if how == "second SIGINT":
        edsb.send_signal(signal.SIGINT)
        said = _read_until(edsb, "Ctrl-C again")  # the first one was handled: the next is the second
        edsb.send_signal(signal.SIGINT)
        return said
    edsb.send_signal(signal.Signals[how])
    return ""


def _kill_leftovers(processes: set[Process], edsb: Popen) -> None:
    """What a failed test left running: only the processes it recorded, by id."""
    for pid, _ in running(processes):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if edsb.poll() is None:
        edsb.kill()
    edsb.wait()


@pytest.mark.parametrize("how", STOPS)
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_no_sandbox_process_outlives_a_stopped_edsb(sandbox: SandboxName, how: str, tmp_path: Path) -> None:
    programs = [program("first", SLEEP if _sandbox(sandbox) == "exact" else SPIN), program("second", SPIN)]
    with OpenAIServer(ProgramScript(programs)) as server:
        edsb = _start(server, tmp_path / "out", tmp_path, 2, 2, sandbox)
        processes: set[Process] = set()
        try:
            wait_until(lambda: _holding(edsb) == 2, edsb, "both programs were running")
            processes = descendants(edsb.pid) | {(edsb.pid, _started(edsb.pid))}  # edsb's own exit too
            said = _stop(edsb, how)
            assert poll(lambda: not running(processes), GONE_WITHIN_S) is not None, running(processes)
            _, stderr = edsb.communicate(timeout=HANG_GUARD_S)
        finally:
            _kill_leftovers(processes, edsb)
    assert edsb.returncode == EXIT_STATUS[how], said + stderr.decode()
    if how != "SIGKILL":
        assert f"0 of 2 results kept in {tmp_path / 'out'}; rerun the same command to resume" in stderr.decode()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_sweep_stopped_by_sigterm_or_sighup_keeps_its_finished_runs_and_resumes(how: str, tmp_path: Path) -> None:
    """Two runs finish, the third is running code when the signal comes: it is dropped, the two are kept, and the
    same command then runs the rest, the dropped one again."""
    benign = program("benign", BENIGN_BODY)
    with OpenAIServer(ProgramScript([benign, benign, program("spin", SPIN), benign, benign])) as server:
        out = tmp_path / "out"
        edsb = _start(server, out, tmp_path, 4, 1, "restricted")
        try:
            wait_until(lambda: len(raw_lines(out)) == 2 and _holding(edsb) == 1, edsb, "the third program ran")
            kept = read_results(out)
            edsb.send_signal(signal.Signals[how])
            _, stderr = edsb.communicate(timeout=HANG_GUARD_S)
        finally:
            _kill_leftovers(set(), edsb)
        assert edsb.returncode == EXIT_STATUS[how], stderr.decode()
        assert f"2 of 4 results kept in {out}; rerun the same command to resume" in stderr.decode()
        assert read_results(out) == kept and len(kept) == 2
        args = run_args(server.base_url, out, 4, "--concurrency", "1", "--code-timeout", "120", sandbox="restricted")
        resumed = edsb_child(args, env=child_env(tmp_path / "cache"))
    assert resumed.returncode == 0, resumed.stderr
    assert "4 runs planned, 2 already done, 2 executed" in resumed.stderr
    results = read_results(out)
    assert results[:2] == kept
    assert len(records_by_key(out)) == 4  # each key once
    assert [result["status"] for result in results] == ["passed"] * 4
