"""Invoking `edsb` the way a user does: through `edsb.cli.main` in this process, or `python -m edsb` in a child.

Both give an `Outcome`: the field names of `subprocess.CompletedProcess`, and it unpacks as a triple, so a test
reads an exit code and the two streams the same way whichever road it took. In-process is fast and lets a test
monkeypatch; a child process is what a signal, a kill or a clean environment needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from edsb.cli import main
from edsb.runner.config import RunConfig
from tests.support.data import DATA, REPO

HANG_GUARD_S = 60.0  # how long `wait_until` polls before it calls the wait a hang
# The PI sampler's secret of every scripted run: carried along, as `--sampler-secret` promises, so that two
# directories of the same selection and seed draw the same points (the tests that compare them rely on it).
SAMPLER_SECRET = "edsb-tests"


class Outcome(NamedTuple):
    """What one `edsb` invocation left behind: its exit code and what it wrote to stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str

    def assert_one_clear_error(self, code: int | None = None, *, contains: str = "") -> None:
        """Exit code ≠ 0 (or exactly `code`), one `edsb: error:` line on stderr, no traceback."""
        assert self.returncode != 0 if code is None else self.returncode == code, (self.returncode, self.stderr)
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, self.stderr
        assert lines[0].startswith("edsb: error: "), self.stderr
        assert "Traceback" not in self.stderr + self.stdout
        assert contains in lines[0], (contains, lines[0])


def exit_code(exit_: SystemExit) -> int:
    """The status `SystemExit` carries, as the shell would see it (None is 0, a message is 1)."""
    code = exit_.code
    return 0 if code is None else code if isinstance(code, int) else 1


def run_edsb(*args: str | Path) -> int:
    """`edsb ARGS` through the real entry point, in this process, output left to pytest; the exit code."""
    try:
        main([str(arg) for arg in args])
    except SystemExit as exit_:
        return exit_code(exit_)
    return 0


def edsb_in_process(args: Sequence[str | Path], capsys: pytest.CaptureFixture[str]) -> Outcome:
    """`edsb ARGS` through `edsb.cli.main` in this process, its output captured with pytest's `capsys`."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return Outcome(exit_code(exit_info.value), captured.out, captured.err)


def child_env(cache_dir: Path | None = None, *, data: Path | None = DATA, **extra: str) -> dict[str, str]:
    """Our environment, the official data (`data=None`: no EDSB_DATA at all), a private response cache and this
    checkout's `src` first on the path (a child in another directory would otherwise import another copy)."""
    env = {name: value for name, value in os.environ.items() if name != "EDSB_DATA"}
    if data is not None:
        env["EDSB_DATA"] = str(data)
    env.update(extra)
    if cache_dir is not None:
        env["EDSB_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def edsb_command(args: Sequence[str | Path]) -> list[str]:
    """`python -m edsb ARGS` with this interpreter."""
    return [sys.executable, "-m", "edsb", *(str(arg) for arg in args)]


def edsb_child(
    args: Sequence[str | Path], *, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> Outcome:
    """`python -m edsb ARGS` in a child process; `env` replaces the environment (default: `child_env()`)."""
    completed = subprocess.run(
        edsb_command(args),
        env=dict(child_env() if env is None else env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Outcome(completed.returncode, completed.stdout, completed.stderr)


def start_edsb(args: Sequence[str | Path], *, env: Mapping[str, str], **popen: Any) -> subprocess.Popen[bytes]:
    """`python -m edsb ARGS` started in the background, for tests that signal or kill it."""
    return subprocess.Popen(edsb_command(args), env=dict(env), **popen)


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    """Poll until `condition()` holds while `process` is still running; a hang guard, not a speed check."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            pytest.fail(f"the run ended (exit {process.returncode}) before {what}: {stderr}")
        if time.monotonic() > deadline:
            pytest.fail(f"hung: still waiting for {what} after {HANG_GUARD_S:g} s")
        time.sleep(0.005)


def ctrl_c_twice(
    process: subprocess.Popen[bytes], started: Callable[[], bool], printed: Callable[[], str], timeout: float = 60
) -> None:
    """Once `started()` holds, Ctrl-C (SIGINT), and once `printed()` shows the first one was noted, Ctrl-C again;
    then wait for the process to end (killed if it does not, so no test leaves it behind)."""
    try:
        wait_until(started, process, "the sweep to start")
        process.send_signal(signal.SIGINT)
        wait_until(lambda: "Ctrl-C again to stop now" in printed(), process, "the first Ctrl-C was noted")
        process.send_signal(signal.SIGINT)
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def scripted_run_args(base_url: str, out: Path, *options: str) -> list[str]:
    """`edsb run` against a loopback server that plays the model `openai:scripted`."""
    return [
        "run", "--model", "openai:scripted", "--base-url", base_url, "--out", str(out),
        "--sampler-secret", SAMPLER_SECRET, *options,
    ]  # fmt: skip


def scripted_run_child(base_url: str, out: Path, cache_dir: Path, *options: str) -> Outcome:
    """`edsb run` against the loopback `base_url` in a child process with a private response cache."""
    return edsb_child(scripted_run_args(base_url, out, *options), env=child_env(cache_dir))


def scripted_config(base_url: str, **settings: Any) -> RunConfig:
    """The `RunConfig` of `run_benchmark` for `openai:scripted` at `base_url`, uncached, on the official data."""
    return RunConfig.model_validate(
        {
            "model": "openai:scripted",
            "base_url": base_url,
            "cache": False,
            "data": str(DATA),
            "sampler_secret": SAMPLER_SECRET,
            **settings,
        }
    )


def isolate_environment(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """No response cache or endpoint leaks in from the machine, and none leaks out of the test."""
    monkeypatch.setenv("EDSB_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
