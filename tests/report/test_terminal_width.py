"""`edsb report` and `edsb compare` in a terminal: every table readable at 80 columns and at 200, never a cell cut
("vari…", "[-1.…"), long lists limited unless `--all`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from edsb.report.compare.paired import build_board
from edsb.report.compare.render import difference_block, leaderboard, render_board
from edsb.report.formats import CompareFormat, ReportFormat
from edsb.report.render import case_rows, load_run, power_header, power_rows, render_report
from edsb.report.tables import Block
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process
from tests.support.run_dir import result_record, write_run_dir

VARIANTS = ("ours", "wo-event", "object-list", "scene-graph")
CASES = 30
LONG_REASON = "Theodore: position (0.65, 0.87) is not where 'in front of fridge_1 || close to counter_2' holds"


def _records(flipped: bool) -> list[dict[str, Any]]:
    """Four variants × 30 cases × 3 levels; `flipped`: every run fails where the other directory's passes (oracle
    against oracle-wrong), with long failure reasons and a few execution errors."""
    records = []
    for variant in VARIANTS:
        for case in range(CASES):
            for level in range(3):
                if not flipped:
                    records.append(result_record(variant, case, ["OA", "RC"], level, 0, "passed"))
                elif case % 7 == 0:
                    message = f"code_runtime: KeyError: 'chair_{case}' raised in parse_event, line {level + 3}"
                    records.append(
                        result_record(
                            variant, case, ["OA", "RC"], level, 0, "error", error_kind="code_runtime", error=message
                        )
                    )
                else:
                    records.append(result_record(variant, case, ["OA", "RC"], level, 0, "failed", reason=LONG_REASON))
    return records


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    # Long directory names, as `edsb run` makes them: they must not widen the tables.
    base = write_run_dir(tmp_path / "oracle-table1-251204-162500", _records(False))
    other = write_run_dir(tmp_path / "oracle-wrong-table1-251204-163000", _records(True))
    return base, other


def _render(width: int, draw) -> str:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=width, color_system=None))
    return buffer.getvalue()


def _assert_nothing_cut(text: str, width: int, cells: list[list[str]]) -> None:
    """No line wider than the terminal, no ellipsis, and every word of every cell whole on some line."""
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text
    for row in cells:
        for cell in row:
            for word in cell.split():
                assert word in text, (word, cell)


@pytest.mark.parametrize("width", [80, 200])
def test_compare_fits_the_terminal_and_limits_the_cases_that_flip(pair: tuple[Path, Path], width: int) -> None:
    board = build_board(list(pair))
    text = _render(width, lambda console: render_board(board, CompareFormat.TABLE, console))
    header, rows = leaderboard(board)
    differences = difference_block(board, board.comparisons[0])
    _assert_nothing_cut(text, width, [header, *rows, list(differences.header), *differences.rows])
    assert header[1:] == list(VARIANTS)  # the presets' order, whatever order the directory lists them in
    flipped = len(VARIANTS) * CASES
    assert "100 more rows not shown: --all shows every one" in text  # 120 cases flip, 20 shown
    # Before: one line per flipped case and every header cut; now a bounded page at any width (the power table
    # repeats the 24 rows of the differences, one line each).
    assert len(text.splitlines()) < (200 if width == 80 else 130)
    everything = _render(width, lambda console: render_board(board, CompareFormat.TABLE, console, show_all=True))
    assert "--all" not in everything and len(everything.splitlines()) > flipped
    assert "oracle-wrong-table1-251204-163000 − oracle-table1-251204-162500" in " ".join(text.split())


@pytest.mark.parametrize("width", [80, 200])
def test_report_fits_the_terminal(pair: tuple[Path, Path], width: int) -> None:
    config, summary = load_run(pair[1])
    text = _render(width, lambda console: render_report(config, summary, ReportFormat.TABLE, console=console))
    cells = [power_header(), *power_rows(summary), [LONG_REASON], *case_rows(summary)[:20]]
    _assert_nothing_cut(text, width, cells)
    assert "100 more rows not shown: --all shows every one" in text  # 120 (variant, case) rows
    assert "20 more rows not shown" in text  # 4 variants × 10 reasons why runs erred
    assert len(text.splitlines()) < (260 if width == 80 else 200)
    everything = _render(
        width, lambda console: render_report(config, summary, ReportFormat.TABLE, console=console, show_all=True)
    )
    assert all(f" {case} " in everything for case in range(CASES))


def test_a_table_too_wide_for_the_terminal_is_stacked_not_cut() -> None:
    from edsb.report.tables import print_block

    header = [f"column-number-{i}" for i in range(8)]
    block = Block("Eight wide columns", header, [[f"value-{i}-of-row" for i in range(8)]])
    text = _render(80, lambda console: print_block(console, block))
    _assert_nothing_cut(text, 80, [header, *block.rows])
    for i in range(8):  # one line per cell: the header beside its value
        assert any(f"column-number-{i}" in line and f"value-{i}-of-row" in line for line in text.splitlines())


def test_report_and_compare_take_all(pair: tuple[Path, Path], capsys) -> None:
    code, out, _ = edsb_in_process(["compare", *map(str, pair), "--format", "markdown"], capsys)
    assert code == 0 and "100 more rows not shown: --all shows every one" in out
    code, out, _ = edsb_in_process(["compare", *map(str, pair), "--format", "markdown", "--all"], capsys)
    assert code == 0 and "not shown" not in out and "| scene-graph | 29 | d0-r0 d1-r0 d2-r0 | - |" in out
    code, out, _ = edsb_in_process(["report", str(pair[1]), "--format", "markdown", "--all"], capsys)
    assert code == 0 and "not shown" not in out and "| scene-graph | 29 | 3 | 0 | 0 |" in out


def test_the_commands_follow_the_terminal_width(pair: tuple[Path, Path]) -> None:
    """`edsb compare` and `edsb report` as a user runs them, the width taken from COLUMNS: wider than a default
    terminal's 80, so the lines can only be that long if it was read (the tests above fit each width in process)."""
    columns = 200
    env = child_env(COLUMNS=str(columns))
    for args in (["compare", *map(str, pair)], ["report", str(pair[1])]):
        outcome = edsb_child(args, env=env)
        assert outcome.returncode == 0, outcome.stderr
        lines = outcome.stdout.splitlines()
        assert "…" not in outcome.stdout and max(len(line) for line in lines) <= columns
        assert max(len(line) for line in lines) > 80  # the width is used, not a default
