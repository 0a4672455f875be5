"""`edsb sandbox check`: which sandbox this host gives, and a self-test of it."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from edsb.cli.app import Command, CommandGroup, app, out

sandbox_app = typer.Typer(
    cls=CommandGroup, no_args_is_help=True, help="Which sandbox runs model code here, and a self-test."
)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("check", cls=Command)
def sandbox_check(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Say which sandbox this host gets and why, then run ten attacks in contained children: exit 0 when every one
    is refused (and honest code still runs), 1 otherwise."""
    import textwrap
    from dataclasses import asdict

    from edsb.sandbox.kernel import host_support, prepare
    from edsb.sandbox.selfcheck import self_check

    support = host_support()
    prepare()
    results = self_check()
    passed = all(result.passed for result in results)
    if as_json:
        report = {
            "host": asdict(support),
            "self_test": [{"name": r.name, "passed": r.passed, **asdict(r.outcome)} for r in results],
            "passed": passed,
        }
        out.print_json(json.dumps(report))
    else:
        lines = [*support.describe(), "self-test, in forked children under every layer this host has:"]
        lines += [
            f"  {'ok  ' if r.passed else 'FAIL'} {r.name}: {r.outcome.status}, {r.outcome.detail}" for r in results
        ]
        verdict = "every attack refused" if passed else "NOT every attack was refused: do not run untrusted code here"
        lines.append(f"result: {verdict}")
        for line in lines:
            indent = "       " if line.startswith("  ") else "  "
            sys.stdout.write(textwrap.fill(line, 80, subsequent_indent=indent, break_long_words=True) + "\n")
    raise typer.Exit(0 if passed else 1)
