"""`edsb run --code-timeout / --code-memory` reach the sandbox; the defaults are safe; a limit too small to work is a
clear error, not a run of crashes."""

from __future__ import annotations

import json
from pathlib import Path

from edsb.runner.config import RunConfig
from edsb.sandbox import DEFAULT_LIMITS
from tests.support.edsb_cli import edsb_child
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, run_args

WARM_UP = program("warm-up", BENIGN_BODY)
LOOP = program("loop", "while True:\n    pass")
# 400 MiB at once: beyond a 256 MiB limit, well within the default 1 GiB.
ALLOCATE = program(
    "allocate",
    "block = ' ' * (400 << 20)\nget_character('David').set_target_action('eat')\n"
    "get_character('David').set_position(get_area_to_sit_on('chair_2'))",
)


def run_loop_and_allocation(tmp_path: Path, env: dict[str, str], *options: str) -> tuple[dict, dict, dict]:
    """A warm-up run (so that the loop's time is not a worker's start-up), the loop, then the allocation."""
    out = tmp_path / "run"
    with OpenAIServer(ProgramScript([WARM_UP, LOOP, ALLOCATE])) as server:
        args = [*run_args(server.base_url, out, 3, "--concurrency", "1"), *options]
        process = edsb_child(args, env=env, cwd=tmp_path)
    assert process.returncode == 0, process.stderr
    by_repeat = {record["repeat"]: record for record in read_results(out)}
    assert by_repeat[0]["status"] == "passed", by_repeat[0]["error"]
    config = json.loads((out / "config.json").read_text())
    return by_repeat[1], by_repeat[2], config


def test_small_limits_reach_the_sandbox(tmp_path: Path, env: dict[str, str]) -> None:
    loop, allocation, config = run_loop_and_allocation(tmp_path, env, "--code-timeout", "1", "--code-memory", "256")
    assert (config["code_timeout"], config["code_memory_mb"]) == (1.0, 256)
    assert loop["error_kind"] == "code_timeout"
    assert loop["error"].endswith("TimeoutError: the code ran longer than 1 s"), loop["error"]
    assert allocation["error_kind"] == "code_memory"


def test_defaults_and_a_longer_timeout(tmp_path: Path, env: dict[str, str]) -> None:
    loop, allocation, config = run_loop_and_allocation(tmp_path, env, "--code-timeout", "3")
    assert (config["code_timeout"], config["code_memory_mb"]) == (3.0, 1024)
    assert loop["error_kind"] == "code_timeout"
    assert loop["error"].endswith("TimeoutError: the code ran longer than 3 s"), loop["error"]
    assert allocation["status"] == "passed", allocation["error"]


def test_default_limits_are_safe() -> None:
    config = RunConfig()
    assert config.code_timeout == DEFAULT_LIMITS.timeout == 10.0
    assert config.code_memory_mb << 20 == DEFAULT_LIMITS.memory_bytes == 1 << 30
    assert DEFAULT_LIMITS.max_plan_bytes <= 16 << 10
    assert DEFAULT_LIMITS.max_result_bytes <= 1 << 20


def test_a_memory_limit_too_small_for_the_sandbox_is_one_clear_error(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    with OpenAIServer(ProgramScript([ALLOCATE])) as server:
        process = edsb_child([*run_args(server.base_url, out, 1), "--code-memory", "64"], env=env, cwd=tmp_path)
    assert process.returncode == 1
    assert process.stderr.startswith("edsb: error: the sandbox failed to start: the code memory limit of 64 MiB is too")
    assert "--code-memory" in process.stderr and "Traceback" not in process.stderr
    assert len(process.stderr.strip().splitlines()) == 1
    assert not out.exists()  # refused before anything was written


def test_a_sandbox_that_cannot_start_leaves_an_earlier_pass_alone(tmp_path: Path, env: dict[str, str]) -> None:
    """The pool starts while the first requests are out; when it cannot, a directory this command did not create
    keeps everything an earlier pass wrote."""
    out = tmp_path / "run"
    with OpenAIServer(ProgramScript([BENIGN_BODY])) as server:
        first = edsb_child([*run_args(server.base_url, out, 1), "--code-memory", "64"], env=env, cwd=tmp_path)
        assert first.returncode == 1 and not out.exists()
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        again = edsb_child([*run_args(server.base_url, out, 1), "--code-memory", "64"], env=env, cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr.startswith("edsb: error: the sandbox failed to start: the code memory limit of 64 MiB")
    assert (out / "notes.txt").read_text() == "mine"
