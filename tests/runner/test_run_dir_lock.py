"""One edsb at a time writes a run directory: the lock is taken before anything of the run is written."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from edsb.results.rundir import LOCK_FILE
from edsb.runner import run as run_module
from edsb.runner.config import RunConfig
from edsb.runner.run import run_benchmark


def _held_elsewhere(run_dir: Path) -> bool:
    """Whether the directory's lock is held: a second open file description cannot take it, even in this process."""
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_the_lock_is_held_before_config_json_is_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Held only while the results store is open, two runs starting together could both write config.json before
    # one of them was refused.
    out = tmp_path / "run"
    seen: list[bool] = []
    resume_check = run_module.check_resume

    def watched(run_dir: Path, config: RunConfig) -> list[str]:
        seen.append(_held_elsewhere(Path(run_dir)))
        return resume_check(run_dir, config)

    monkeypatch.setattr(run_module, "check_resume", watched)
    outcome = run_benchmark(RunConfig(model="oracle", cases=[13], sandbox="restricted"), out, quiet=True)
    assert seen == [True]
    assert len(outcome.results) == 3 and not _held_elsewhere(out)
