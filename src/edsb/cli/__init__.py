"""The `edsb` command line: a thin typer layer over the packages. `app` holds the app and turns user errors into
one line; each other module adds a group of commands to it (importing them here registers them)."""

from edsb.cli import data, report, run, sandbox, score
from edsb.cli.app import app, entry, main
from edsb.cli.run import _why_runs_failed

__all__ = ["_why_runs_failed", "app", "data", "entry", "main", "report", "run", "sandbox", "score"]
