"""`edsb run --out DIR` on a directory that holds damage: a torn last line is repaired and the run resumes; anything
else is refused with one line, and every byte already recorded stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import RUNS


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_torn_last_line_is_dropped_and_that_run_done_again(edsb, server, finished) -> None:
    out, args = finished
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed in the middle of a write
    asked = len(server.chat_requests)

    outcome = edsb(*args)
    assert outcome.returncode == 0 and "Traceback" not in outcome.stderr
    assert len(server.chat_requests) - asked == 2  # one run again: its Narrator and its Event Parser
    repaired = results.read_bytes().splitlines(keepends=True)
    assert repaired[: RUNS - 1] == lines[:-1]  # whole lines kept byte for byte
    records = [json.loads(line) for line in repaired]
    assert sorted(r["repeat"] for r in records) == list(range(RUNS))
    assert all(r["status"] == "passed" for r in records)


@pytest.mark.parametrize(
    ("damage", "contains"),
    [
        (lambda out: _replace_line(out / "results.jsonl", 1, b"{not json\n"), "corrupt line 2"),
        (lambda out: _replace_line(out / "results.jsonl", 0, b'["a list"]\n'), "not a run record"),
        (lambda out: (out / "config.json").write_text('{"model": '), "config.json"),
        (lambda out: (out / "config.json").write_text('{"model": "openai:x", "repeats": "many"}'), "config.json"),
    ],
    ids=["corrupt middle line", "line that is not a record", "truncated config", "config of a wrong type"],
)
def test_damage_is_refused_and_nothing_changes(edsb, server, finished, damage, contains: str) -> None:
    out, args = finished
    damage(out)
    before = snapshot(out)
    asked = len(server.chat_requests)
    outcome = edsb(*args)
    outcome.assert_one_clear_error(contains=contains)
    assert snapshot(out) == before
    assert len(server.chat_requests) == asked


def test_other_options_on_a_finished_directory_are_refused(edsb, server, finished) -> None:
    out, args = finished
    before = snapshot(out)
    outcome = edsb(*args, "--seed", "1")
    outcome.assert_one_clear_error(2, contains="holds a different run: seed was 0, now 1")
    assert snapshot(out) == before


def test_a_directory_refuses_to_mix_samplers(edsb, server, finished) -> None:
    out, args = finished
    assert json.loads((out / "config.json").read_text())["sampler"] == "reference"
    before = snapshot(out)
    outcome = edsb(*args, "--sampler", "optimal")
    outcome.assert_one_clear_error(
        2, contains="holds a different run: sampler was 'reference', now 'optimal' (pass --sampler reference"
    )
    assert snapshot(out) == before


def test_a_directory_written_before_the_sampler_choice_resumes_as_optimal_and_still_reports(
    edsb, server, finished
) -> None:
    out, args = finished
    config = json.loads((out / "config.json").read_text())
    del config["sampler"], config["format"]  # as edsb wrote it before the sampler choice
    (out / "config.json").write_text(json.dumps(config))
    before = snapshot(out)

    edsb(*args).assert_one_clear_error(2, contains="sampler was 'optimal', now 'reference' (pass --sampler optimal")
    assert snapshot(out) == before
    asked = len(server.chat_requests)
    assert edsb(*args, "--sampler", "optimal").returncode == 0
    assert len(server.chat_requests) == asked  # every run was already done
    assert json.loads((out / "config.json").read_text())["sampler"] == "optimal"

    (out / "config.json").write_text(json.dumps(config))  # the old file again: the report reads it as it is
    report = edsb("report", out, "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["variants"]["object-list"]["runs"] == RUNS


def test_a_typo_in_the_model_leaves_no_directory_behind(edsb, tmp_path: Path) -> None:
    outcome = edsb("run", "--model", "gpt-4o", "--cases", "13", "--out", tmp_path / "typo")
    outcome.assert_one_clear_error(2, contains="(did you mean 'openai:gpt-4o'?)")
    assert not (tmp_path / "typo").exists()  # so the corrected command can use the same --out


def _replace_line(path: Path, index: int, line: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[index] = line
    path.write_bytes(b"".join(lines))
