"""The `edsb` command line: a thin typer layer over the packages."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Event-Driven Storytelling Benchmark harness.")


def main() -> None:
    app()
