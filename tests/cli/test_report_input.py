"""`edsb report` and `edsb compare` on directories that are missing, damaged or half-written: one clear line and a
non-zero exit code, or (for a torn last line, what a killed run leaves) a report of the whole lines; files are only
read, never changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import RUNS
from tests.cli.test_run_directory import snapshot


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("where", ["missing", "a file", "an empty directory"])
def test_not_a_run_directory(edsb, finished, tmp_path: Path, command: str, where: str) -> None:
    target = tmp_path / "target"
    if where == "a file":
        target.write_text("x\n")
    elif where == "an empty directory":
        target.mkdir()
    args = [command, target] if command == "report" else [command, finished[0], target]
    edsb(*args).assert_one_clear_error(2, contains=f"{target}: not a run directory")


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{run}", "--format", "nope"],
        ["compare", "{run}", "{run}", "--format", "nope"],
        ["compare", "{run}", "{run}", "--format", "html"],
        ["compare", "{run}"],
    ],
    ids=["report format", "compare format", "compare html without -o", "compare one directory"],
)
def test_usage_errors(edsb, finished, args: list[str]) -> None:
    edsb(*(str(finished[0]) if arg == "{run}" else arg for arg in args)).assert_one_clear_error(2)


def test_a_torn_last_line_is_left_out_of_the_report(edsb, finished) -> None:
    out, _ = finished
    results = out / "results.jsonl"
    results.write_bytes(results.read_bytes()[:-40])  # the last record lost its end
    before = snapshot(out)
    outcome = edsb("report", out, "--format", "json")
    assert outcome.returncode == 0 and "Traceback" not in outcome.stderr
    assert json.loads(outcome.stdout)["variants"]["object-list"]["runs"] == RUNS - 1
    assert "note:" in outcome.stderr and "last line is torn" in outcome.stderr
    assert snapshot(out) == before


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_corrupt_middle_line_is_refused(edsb, finished, command: str) -> None:
    out, _ = finished
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(lines[0] + b"{garbage\n" + b"".join(lines[2:]))
    before = snapshot(out)
    args = [command, out] if command == "report" else [command, out, out]
    edsb(*args).assert_one_clear_error(1, contains="corrupt line 2")
    assert snapshot(out) == before


def test_a_figure_that_cannot_be_written(edsb, finished, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x\n")
    outcome = edsb("report", finished[0], "--plot", tmp_path / "a-file" / "figure.png")
    outcome.assert_one_clear_error(1, contains="a-file")


@pytest.mark.parametrize(
    ("file", "text"),
    [
        ("config.json", '{"variants": 5}'),
        ("results.jsonl", '{"key": "object-list/tc13-d0-r0"}\n'),
        ("results.jsonl", '{"key": "x", "variant": "object-list", "case": "thirteen", "status": 5}\n'),
    ],
    ids=["config of a wrong type", "record without fields", "record of wrong types"],
)
def test_damaged_files_are_one_clear_error(edsb, finished, file: str, text: str) -> None:
    out, _ = finished
    (out / file).write_text(text)
    before = snapshot(out)
    edsb("report", out).assert_one_clear_error()
    assert snapshot(out) == before
