"""A run directory written by edsb 0.1.0 (config.json and results.jsonl without a format number) is reported and
resumed by this edsb through the one migration, and its report is byte for byte what 0.1.0 printed.

`old_formats/oracle-0.1.0` is `edsb run --model oracle --cases 13,60 --sandbox restricted` as 0.1.0 wrote it (its
`data` path set to null); `old_formats/oracle-0.1.0.report/` holds what 0.1.0's `edsb report` printed for it in each
format, at 80 columns, except two tables of the table and Markdown formats, whose wording changed on purpose since
0.1.0: the power table's title and note now say that its figure is an upper bound, and the tokens table's header
fits a line or two at 80 columns, its explanations moved to notes under it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edsb import __version__
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process

FIXTURE = Path(__file__).parent / "old_formats" / "oracle-0.1.0"
PRINTED = FIXTURE.with_name(f"{FIXTURE.name}.report")
IN_PROCESS = ("markdown", "csv", "json", "samples")  # the table's width is fixed when the CLI is imported: a child


@pytest.fixture
def old_dir(tmp_path: Path) -> Path:
    """A copy of the 0.1.0 directory, under its own name (the report's card names the directory)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / FIXTURE.name))


def printed_by_0_1_0(fmt: str) -> str:
    """What 0.1.0 printed; the results document says which version wrote it, now this one, and its sampling settings
    say whether requests carried prompt-cache markers (0.1.0's never did)."""
    text = (PRINTED / f"report.{fmt}").read_text(encoding="utf-8")
    if fmt != "json":
        return text
    text = text.replace('"written_by": "0.1.0"', f'"written_by": "{__version__}"')
    return text.replace('"json_mode": true,\n', '"json_mode": true,\n      "prompt_cache": false,\n')


def reports(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """`edsb report RUN_DIR --format F` for every format, as printed."""
    printed = {}
    for fmt in IN_PROCESS:
        outcome = edsb_in_process(["report", run_dir, "--format", fmt], capsys)
        assert (outcome.returncode, outcome.stderr) == (0, ""), outcome
        printed[fmt] = outcome.stdout
    table = edsb_child(["report", run_dir], env=child_env(COLUMNS="80"))
    assert (table.returncode, table.stderr) == (0, ""), table
    return printed | {"table": table.stdout}


def test_an_old_directory_reports_as_0_1_0_did(old_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert reports(old_dir, capsys) == {fmt: printed_by_0_1_0(fmt) for fmt in (*IN_PROCESS, "table")}


def test_an_old_directory_resumes_through_the_migration(old_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = (old_dir / "results.jsonl").read_bytes()
    old_config = json.loads((old_dir / "config.json").read_text(encoding="utf-8"))
    args = ["run", "--model", "oracle", "--cases", "13,60", "--sandbox", "restricted", "--out", old_dir, "--quiet"]
    outcome = edsb_in_process(args, capsys)
    assert outcome.returncode == 0, outcome
    assert "4 already done, 0 executed" in outcome.stdout + outcome.stderr
    assert (old_dir / "results.jsonl").read_bytes() == lines  # nothing was rerun or rewritten
    after = reports(old_dir, capsys)
    # The resume recorded what 0.1.0 left out (the data directory it ran on, how many runs were planned), the
    # version that wrote config.json last, and this run's prompt-cache setting.
    document, before = json.loads(after.pop("json")), json.loads(printed_by_0_1_0("json"))
    del document["run"]["sampling"]["prompt_cache"], before["run"]["sampling"]["prompt_cache"]
    assert document["run"].pop("data")["path"] is not None and document["run"]["counts"].pop("planned") == 4
    assert document["run"].pop("edsb_version") == __version__
    del before["run"]["data"], before["run"]["counts"]["planned"], before["run"]["edsb_version"]
    assert (document, after) == (
        before,
        {fmt: printed_by_0_1_0(fmt) for fmt in ("markdown", "csv", "samples", "table")},
    )
    new_config = json.loads((old_dir / "config.json").read_text(encoding="utf-8"))
    same = ("model", "sampler_secret", "sampler", "sandbox", "seed", "cases", "distraction", "max_tokens")
    assert {name: new_config[name] for name in same} == {name: old_config[name] for name in same}
