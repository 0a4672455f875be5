"""A record that cannot be serialised: that one run is recorded as `internal_error` with the reason, the
sweep goes on, and the next pass retries it. Content can no longer cause this (text is cleaned where it enters, and
`to_line` repairs what slipped through), so the failure is injected into the real pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edsb.results import RunResult
from edsb.runner.run import run_benchmark
from tests.support.edsb_cli import scripted_config
from tests.support.hostile_script import BENIGN_PLAN, RunScript, ScriptedRun, narrator_json
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import records_by_key
from tests.support.scripted_programs import CASE, VARIANT

BROKEN = f"{VARIANT}/tc{CASE}-d0-r1"


def _config(base_url: str) -> Any:
    return scripted_config(base_url, variants=[VARIANT], cases=[CASE], distraction=[0], repeats=3, concurrency=1)


def test_a_record_that_cannot_be_written_is_an_internal_error_and_the_sweep_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = RunResult.to_line

    def to_line(self: RunResult) -> bytes:
        if self.key == BROKEN and self.error_kind is None:
            raise TypeError("Object of type Mystery is not JSON serializable")
        return real(self)

    monkeypatch.setattr(RunResult, "to_line", to_line)
    script = [ScriptedRun(f"run{i}", narrator_json(f"run{i}")) for i in range(6)]
    out = tmp_path / "run"
    with OpenAIServer(RunScript(script)) as server:
        outcome = run_benchmark(_config(server.base_url), out, quiet=True)
        assert (outcome.stats.done, outcome.stats.passed, outcome.stats.incomplete) == (3, 2, 1)
        records = records_by_key(out)
        broken = records.pop(BROKEN)
        assert (broken["status"], broken["error_kind"]) == ("incomplete", "internal_error")
        assert broken["error"] == (
            "internal_error: the result could not be written (TypeError: Object of type Mystery is not JSON "
            "serializable). This is a bug of edsb, not the model's error: please report it."
        )
        assert [(r["status"], r["plan"]) for r in records.values()] == [("passed", BENIGN_PLAN)] * 2
        monkeypatch.setattr(RunResult, "to_line", real)
        again = run_benchmark(_config(server.base_url), out, quiet=True)  # the next pass retries that run only
    assert (again.skipped, again.stats.done, again.stats.passed) == (2, 1, 1)
    assert records_by_key(out)[BROKEN]["status"] == "passed"
