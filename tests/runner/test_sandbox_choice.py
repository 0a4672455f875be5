"""`--sandbox auto|exact|restricted`: resolved once per run (auto falls back with one line where the kernel lacks the
layers, an explicit exact there is a usage error), recorded in config.json and in every result, part of the run's
identity, and named by `edsb compare` when two runs differ in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.errors import UsageError
from edsb.results.rundir import CONFIG_FILE
from edsb.runner.config import IDENTITY_FIELDS, RunConfig, read_config, resolve_run_config
from edsb.sandbox.kernel import PROBE_ENV, host_support
from tests.runner.test_config import NO_OPTIONS
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process, scripted_run_args
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import records_by_key, result_record, write_run_dir

SELECTION = ("--cases", "13,60", "--distraction", "0", "--no-cache", "--quiet")


def _write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_auto_is_exact_where_the_host_supports_it_and_restricted_with_a_notice_elsewhere() -> None:
    notes: list[str] = []
    config = resolve_run_config(dict(NO_OPTIONS), notes=notes)
    if host_support().exact:
        assert (config.sandbox, notes) == ("exact", [])
    else:
        assert config.sandbox == "restricted" and len(notes) == 1 and "exact sandbox cannot run" in notes[0]
    assert RunConfig().sandbox == config.sandbox  # a config built without the option gets what auto picks


def test_the_sandbox_comes_from_the_file_or_the_command_line_and_is_part_of_the_identity(tmp_path: Path) -> None:
    path = _write(tmp_path, 'sandbox = "restricted"')
    notes: list[str] = []
    assert resolve_run_config(dict(NO_OPTIONS), path, notes=notes).sandbox == "restricted"
    assert notes == []  # chosen, not fallen back to: nothing to say
    if host_support().exact:
        assert resolve_run_config({**NO_OPTIONS, "sandbox": "exact"}, path).sandbox == "exact"
    with pytest.raises(UsageError, match="unknown sandbox 'best'") as raised:
        resolve_run_config(dict(NO_OPTIONS), _write(tmp_path, 'sandbox = "best"'))
    assert "\n" not in str(raised.value).strip()
    assert "sandbox" in IDENTITY_FIELDS
    assert RunConfig(sandbox="restricted").identity()["sandbox"] == "restricted"


def test_a_config_json_written_before_the_choice_reads_as_restricted(tmp_path: Path) -> None:
    written = RunConfig(model="openai:m", seed=3, sandbox="exact").model_dump(mode="json")
    del written["sandbox"]
    assert read_config(_write(tmp_path, json.dumps(written), CONFIG_FILE)).sandbox == "restricted"


def test_a_restricted_run_records_its_sandbox_and_a_resume_refuses_another(
    scripted_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`edsb run --sandbox restricted` end to end over HTTP: config.json and every result line say which sandbox
    ran the code; resuming the directory with another sandbox is refused, with the option that would match."""
    out = tmp_path / "run"
    args = scripted_run_args(scripted_server.base_url, out, *SELECTION)
    code, _, err = edsb_in_process([*args, "--sandbox", "restricted"], capsys)
    assert code == 0, err
    assert "note:" not in err
    assert json.loads((out / CONFIG_FILE).read_text())["sandbox"] == "restricted"
    records = records_by_key(out)
    assert len(records) == 2 and {record["sandbox"] for record in records.values()} == {"restricted"}
    assert all(record["status"] in ("passed", "failed", "error") for record in records.values())
    require_kernel_sandbox()  # the exact sandbox to resume with
    code, _, err = edsb_in_process([*args, "--sandbox", "exact"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "sandbox was 'restricted', now 'exact'" in lines[0]
    assert "--sandbox restricted" in lines[0]


def test_a_host_without_landlock_falls_back_with_one_line_and_refuses_an_explicit_exact(
    scripted_server: OpenAIServer, tmp_path: Path, private_cache: Path
) -> None:
    """The host's probe made to miss Landlock (a real child process: the probe is once per process)."""
    env = child_env(private_cache, **{PROBE_ENV: "no-landlock"})
    out = tmp_path / "auto"
    result = edsb_child(scripted_run_args(scripted_server.base_url, out, *SELECTION), env=env)
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "exact sandbox cannot run on this host" in notes[0] and "Landlock" in notes[0]
    assert json.loads((out / CONFIG_FILE).read_text())["sandbox"] == "restricted"
    assert {record["sandbox"] for record in records_by_key(out).values()} == {"restricted"}

    refused = tmp_path / "exact"
    result = edsb_child(scripted_run_args(scripted_server.base_url, refused, *SELECTION, "--sandbox", "exact"), env=env)
    result.assert_one_clear_error(2, contains="--sandbox exact cannot run on this host")
    assert not refused.exists()


def test_compare_names_the_sandboxes_of_runs_that_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [result_record("ours", 13, ["OA"], 0, r, "passed") for r in range(2)]
    exact, restricted = write_run_dir(tmp_path / "a", lines), write_run_dir(tmp_path / "b", lines)
    config = json.loads((exact / CONFIG_FILE).read_text())
    (exact / CONFIG_FILE).write_text(json.dumps(config | {"sandbox": "exact"}))
    code, _, err = edsb_in_process(["compare", str(exact), str(restricted)], capsys)
    assert code == 0
    # a directory without the field was written before --sandbox existed: the restricted sandbox ran it
    assert "different sandboxes (a: exact, b: restricted)" in " ".join(err.split())
    _, _, err = edsb_in_process(["compare", str(restricted), str(restricted)], capsys)
    assert "different sandboxes" not in err
