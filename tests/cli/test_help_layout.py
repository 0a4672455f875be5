"""`edsb run --help` at 80 columns is a page a person can scan: options grouped in named panels, each help short."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from rich.cells import cell_len
from rich.text import Text
from typer.testing import CliRunner

from edsb.cli import app

PANELS = ("Model", "Selection", "Generation", "Sampler and sandbox", "Limits", "Output")  # in this order
MAX_HELP_LINES = 3
PANEL_TOP = re.compile(r"^╭─ (?P<title>.+?) ─+╮$")
CELL = re.compile(r"^│ (?P<cell>.*) │$")
OPTION = re.compile(r"^\*?\s*(?P<flag>--[\w-]+)")  # a row begins with its flag (after a required star)


def _help_page(command: str) -> str:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return Text.from_ansi(result.output).plain  # a CI runner may force colours


def _rows(page: str) -> dict[str, tuple[str, int]]:
    """Each option's panel and the number of lines its row spans, read from the rich table."""
    rows: dict[str, tuple[str, int]] = {}
    panel, flag = "", ""
    for line in page.splitlines():
        if top := PANEL_TOP.match(line):
            panel, flag = top["title"], ""
        elif (cell := CELL.match(line)) and (start := OPTION.match(cell["cell"])):
            flag = start["flag"]
            rows[flag] = (panel, 1)
        elif cell and flag:  # a continuation line of the row above
            rows[flag] = (panel, rows[flag][1] + 1)
        else:  # the panel's bottom edge, or text outside any panel
            flag = ""
    return rows


def _declared(command: str) -> set[str]:
    """Every long option the command takes, `--help` included."""
    group: Any = typer.main.get_command(app)  # typer's own click, not the `click` package's classes
    params = group.commands[command].params
    return {opt for p in params if p.param_type_name == "option" for opt in p.opts if opt.startswith("--")} | {"--help"}


@pytest.mark.parametrize("command", ["run", "check-model"])
def test_every_option_sits_in_a_named_panel_in_three_lines(command: str) -> None:
    page = _help_page(command)
    rows = _rows(page)
    assert set(rows) == _declared(command), "the parser missed options, or the page lost some"
    assert {flag: panel for flag, (panel, _) in rows.items() if panel not in PANELS} == {}
    assert {flag: lines for flag, (_, lines) in rows.items() if lines > MAX_HELP_LINES} == {}
    assert [line for line in page.splitlines() if cell_len(line) > 80] == []


def test_run_uses_every_panel_in_order() -> None:
    titles = [top["title"] for line in _help_page("run").splitlines() if (top := PANEL_TOP.match(line))]
    assert titles == list(PANELS)


@pytest.mark.parametrize("command", ["run", "check-model"])
def test_each_option_sits_in_the_panel_of_its_declared_group(command: str) -> None:
    from edsb.settings.declare import declared
    from edsb.settings.run import CheckModelSettings, RunSettings

    groups = {s.option: str(s.group) for s in {**declared(RunSettings), **declared(CheckModelSettings)}.values()}
    rows = _rows(_help_page(command))
    assert {flag: panel for flag, (panel, _) in rows.items() if flag != "--help" and groups[flag] != panel} == {}


def test_check_model_shows_its_panels_in_the_runs_order() -> None:
    titles = [top["title"] for line in _help_page("check-model").splitlines() if (top := PANEL_TOP.match(line))]
    assert titles == ["Model", "Generation"]
