"""`edsb run` in-process, as the CLI composes it: the runner executes, the report writes summary.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edsb.report.summary import write_summary
from edsb.runner.config import RunConfig
from edsb.runner.run import RunOutcome, run_benchmark


def run_and_summarise(config: RunConfig, out: Path, **options: Any) -> RunOutcome:
    outcome = run_benchmark(config, out, **options)
    write_summary(out, outcome.results, runs_planned=outcome.runs_planned)
    return outcome
