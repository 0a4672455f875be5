"""The one migration of older files: format 1 (no `format` field) read as this version writes it, a newer format
refused with one line, and what this version writes read back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edsb.errors import EdsbError
from edsb.results.migrate import CONFIG_FORMAT, RESULT_FORMAT, current_config, current_result
from edsb.results.rundir import CONFIG_FILE, RunDirectory, read_reported_config
from edsb.runner.config import RunConfig, read_config, write_config

FIXTURE = Path(__file__).parent / "old_formats" / "oracle-0.1.0"
# The oldest config.json a user may still hold: written before --sampler, --sandbox, the sampler secret, --perturb
# and --max-tokens existed.
OLDEST_CONFIG = {"model": "local", "variants": ["ours"], "cases": [13], "distraction": [0], "repeats": 1, "seed": 0}
OLDEST_LINE = {
    "key": "ours/tc13-d0-r0", "variant": "ours", "case": 13, "distraction": 0, "repeat": 0, "status": "passed",
    "sampler": {"collision": "bbox"},
}  # fmt: skip


def test_the_oldest_config_reads_as_what_that_version_did() -> None:
    migrated = current_config(OLDEST_CONFIG)
    expected = {"sampler": "optimal", "sandbox": "restricted", "sampler_secret": "", "perturb": 0}
    assert {name: migrated[name] for name in expected} == expected
    assert (migrated["max_tokens"], migrated["model_seed"], migrated["format"]) == (512, 0, CONFIG_FORMAT)
    assert "format" not in OLDEST_CONFIG  # the caller's object is left as read


def test_a_recorded_setting_is_never_replaced_by_an_old_default() -> None:
    recorded = OLDEST_CONFIG | {"model": "openai:m", "sampler": "reference", "sandbox": "exact", "perturb": 3}
    migrated = current_config(recorded)
    assert {name: migrated[name] for name in recorded} == recorded and "max_tokens" not in migrated


def test_the_oldest_result_line_reads_as_what_that_version_did() -> None:
    migrated = current_result(OLDEST_LINE)
    assert migrated["sandbox"] == "restricted" and migrated["format"] == RESULT_FORMAT
    assert migrated["sampler"] == {"method": "optimal", "collision": "bbox"}
    assert current_result(OLDEST_LINE | {"sampler": None})["sampler"] is None  # no position sampled: none


def test_a_format_2_config_reads_with_or_without_the_batch_settings() -> None:
    # edsb 0.2.0 wrote format 2 with no batch settings; edsb 0.3.0 wrote them under the same number.
    of_0_2 = OLDEST_CONFIG | {"format": 2, "sampler": "reference", "sandbox": "exact", "sampler_secret": "s"}
    of_0_3 = of_0_2 | {"batch": True, "batch_poll_s": 5.0, "batch_retries": 1}
    assert current_config(of_0_2)["batch"] is False
    migrated = current_config(of_0_3)
    assert {name: migrated[name] for name in of_0_3} == of_0_3 | {"format": CONFIG_FORMAT}


@pytest.mark.parametrize("found", [CONFIG_FORMAT + 1, 0, "2", True])
def test_a_newer_or_foreign_format_is_one_clear_error(found: Any) -> None:
    with pytest.raises(EdsbError, match=r"^old/config\.json: ") as error:
        current_config(OLDEST_CONFIG | {"format": found}, "old/config.json")
    assert ("upgrade edsb" in str(error.value)) == (found == CONFIG_FORMAT + 1)


def test_what_this_version_writes_reads_back_unchanged(tmp_path: Path) -> None:
    config = RunConfig(model="oracle", cases=[13], sandbox="exact", sampler_secret="s")
    write_config(tmp_path, config)
    written = json.loads((tmp_path / CONFIG_FILE).read_text(encoding="utf-8"))
    assert next(iter(written)) == "format" and written["format"] == CONFIG_FORMAT
    assert current_config(written) == written and read_config(tmp_path / CONFIG_FILE) == config


def test_the_0_1_0_directory_reads_through_the_migration(tmp_path: Path) -> None:
    directory = RunDirectory.open(FIXTURE)
    assert directory.config.format == CONFIG_FORMAT and directory.config.sandbox == "restricted"
    assert [r.format for r in directory.results] == [RESULT_FORMAT] * 4
    assert {r.sampler_method for r in directory.results} == {"reference", None}  # recorded: kept
    assert (
        read_config(FIXTURE / CONFIG_FILE).sampler_secret
        == json.loads((FIXTURE / CONFIG_FILE).read_text())["sampler_secret"]
    )
    assert read_reported_config(tmp_path).sampler == "optimal"  # no config.json at all: the oldest directory
