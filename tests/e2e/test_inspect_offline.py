"""Checking an Inspect install with no network: the real `inspect eval` command, in a child process that can reach
nothing beyond loopback (tests/support/offline_site), with Hugging Face offline and an empty tiktoken cache, runs
edsb's tasks on `--model edsb/oracle` (the provider registered through edsb's `inspect_ai` entry point) to 1.0 and
on `edsb/oracle-wrong` to 0.0, in every sample, as `edsb run --model oracle` does."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import EvalLog, read_eval_log

from edsb.inspect_tasks.tasks import edsb_table1, edsb_table2
from tests.support.data import REPO
from tests.support.edsb_cli import child_env

OFFLINE_SITE = REPO / "tests" / "support" / "offline_site"
TASKS = {"edsb/edsb_table1": edsb_table1, "edsb/edsb_table2": edsb_table2}


def inspect_eval_offline(tmp_path: Path, *args: str) -> tuple[EvalLog, list[str]]:
    """`inspect eval ARGS` as a user without network runs it; its log read back, and what it tried to reach."""
    attempts = tmp_path / "network-attempts.txt"
    env = child_env(
        tmp_path / "cache",
        EDSB_OFFLINE="1",
        EDSB_TEST_OFFLINE=str(attempts),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken"),  # empty: a token count by tiktoken would have to download
        INSPECT_LOG_DIR=str(tmp_path / "logs"),
    )
    # The installed edsb, not the source tree on the path: Inspect names a task `edsb/...` only when its package is
    # installed (site-packages or editable per its direct_url.json), and the source tree's own `edsb.egg-info`, which
    # an editable install leaves in src/, would be found first and carries no direct_url.json.
    env["PYTHONPATH"] = os.pathsep.join([str(OFFLINE_SITE), str(REPO)])
    inspect = Path(sys.executable).with_name("inspect")
    command = [str(inspect), "eval", *args, "--display", "plain", "--max-retries", "0"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert attempts.is_file(), "the child never installed the network guard"
    (log_file,) = (tmp_path / "logs").glob("*.eval")
    return read_eval_log(str(log_file)), attempts.read_text().splitlines()


def sample_scores(log: EvalLog) -> set[tuple[float, float]]:
    """The distinct (success, execution) values of the log's samples."""
    assert log.status == "success", log.error
    values = set()
    for sample in log.samples or []:
        assert sample.error is None, sample.error.message
        (score,) = sample.scores.values()
        values.add((score.value["success"], score.value["execution"]))
    return values


@pytest.mark.parametrize(
    ("task", "model", "options", "expected"),
    [
        ("edsb/edsb_table1", "edsb/oracle-wrong", [], {(0.0, 1.0)}),
        ("edsb/edsb_table2", "edsb/oracle", ["-T", "sampler=optimal"], {(1.0, 1.0)}),
        ("edsb/edsb_table2", "edsb/oracle-wrong", ["-T", "sampler=optimal"], {(0.0, 1.0)}),
    ],
    ids=["table1-oracle-wrong", "table2-oracle", "table2-oracle-wrong"],
)
def test_the_oracle_scores_through_inspect_with_no_network(
    tmp_path: Path, task: str, model: str, options: list[str], expected: set[tuple[float, float]]
) -> None:
    log, attempts = inspect_eval_offline(tmp_path, task, "--model", model, "--epochs", "1", *options)
    assert attempts == []
    assert sorted(sample.id for sample in log.samples or []) == sorted(sample.id for sample in TASKS[task]().dataset)
    assert sample_scores(log) == expected
    assert log.results is not None
    totals = {
        score.name: value for score in log.results.scores for metric in score.metrics.values()
        if (value := metric.value) is not None and metric.name == "Total"
    }  # fmt: skip
    assert totals == {"success": next(iter(expected))[0], "execution": 1.0}
    assert log.stats.model_usage[model].input_tokens > 0  # counted by the provider, without a tokenizer file


def test_the_inspect_pages_first_command_scores_1_offline(tmp_path: Path) -> None:
    page = (REPO / "docs" / "inspect.md").read_text(encoding="utf-8")
    first = next(line for line in page.splitlines() if line.startswith("inspect eval "))
    command = shlex.split(first.partition("#")[0])
    assert command[:4] == ["inspect", "eval", "edsb/edsb_table1", "--model"] and command[4] == "edsb/oracle", first
    log, attempts = inspect_eval_offline(tmp_path, *command[2:])
    assert attempts == []
    assert sorted(sample.id for sample in log.samples or []) == sorted(sample.id for sample in edsb_table1().dataset)
    assert sample_scores(log) == {(1.0, 1.0)}
    assert log.results is not None
    assert all(metric.value == 1.0 for score in log.results.scores for metric in score.metrics.values())


def test_the_oracle_follows_a_perturbed_benchmark(tmp_path: Path) -> None:
    # the renamed benchmark's prompts name other characters and objects: the oracle needs the same seed
    log, attempts = inspect_eval_offline(
        tmp_path, "edsb/edsb_table1", "--model", "edsb/oracle", "-T", "cases=13,44", "-T", "perturb=3",
        "-M", "perturb=3", "--epochs", "1",
    )  # fmt: skip
    assert attempts == []
    assert len(log.samples or []) == 6
    assert sample_scores(log) == {(1.0, 1.0)}
