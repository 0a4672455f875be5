"""The plan and text limits as options: `--max-plan-*` change what a plan may be (part of the run's
identity), `--max-error-chars` / `--max-text-chars` only what a result keeps of the model's text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.edsb_cli import edsb_in_process, scripted_run_args
from tests.support.hostile_script import RunScript, ScriptedRun, narrator_json
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import CASE, VARIANT, program

EXTRAS = "".join(f"get_character('extra_{i}').set_target_action('eat')\n" for i in range(69))
SEVENTY = program(
    "seventy",
    EXTRAS + "get_character('David').set_target_action('eat')\n"
    "get_character('David').set_position(get_area_to_sit_on('chair_2'))\n",
)
LONG_ACTIVITY = "eat " * 1000


def _run(base_url: str, out: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    selection = ["--variant", VARIANT, "--cases", str(CASE), "--distraction", "0", "--no-cache", "--quiet"]
    outcome = edsb_in_process(scripted_run_args(base_url, str(out), *selection, *options), capsys)
    return outcome.returncode, outcome.stderr


def test_plan_and_text_limits_are_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = [ScriptedRun(f"run{i}", narrator_json(f"run{i}", LONG_ACTIVITY), SEVENTY) for i in range(3)]
    with OpenAIServer(RunScript(script)) as server:
        code, stderr = _run(server.base_url, tmp_path / "default", capsys)
        assert code == 0, stderr
        (default,) = read_results(tmp_path / "default")
        assert (default["error_kind"], default["error"]) == (
            "code_output",
            "code_output: the plan sets 70 characters; the limit is 64 (--max-plan-characters)",
        )
        assert default["event"]["activity"] == LONG_ACTIVITY[:2000] + "… [2,000 more characters]"
        assert default["truncated"] == ["event"]

        options = ("--max-plan-characters", "70", "--max-text-chars", "5000", "--max-error-chars", "300")
        code, stderr = _run(server.base_url, tmp_path / "raised", capsys, *options)
        assert code == 0, stderr
        (raised,) = read_results(tmp_path / "raised")
        assert (raised["status"], len(raised["plan"])) == ("passed", 70)
        assert (raised["event"]["activity"], raised["truncated"]) == (LONG_ACTIVITY, [])
        config = json.loads((tmp_path / "raised" / "config.json").read_text())
        assert (config["max_plan_characters"], config["max_text_chars"], config["max_error_chars"]) == (70, 5000, 300)

        # The plan limits decide verdicts: another value cannot resume the directory; the text limits may change.
        code, stderr = _run(server.base_url, tmp_path / "raised", capsys, "--max-plan-characters", "64")
        assert code != 0 and "max_plan_characters was 70, now 64" in stderr
        code, stderr = _run(server.base_url, tmp_path / "raised", capsys, "--max-plan-characters", "70")
        assert code == 0 and "1 already done, 0 executed" in stderr, stderr


def test_a_small_text_limit_never_cuts_the_plan_the_judge_saw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan is bounded by the plan limits, not the text limit: the record keeps the plan that was judged."""
    name = "extra_" + "x" * 400  # a 406-character name, within --max-plan-string-chars (1,000)
    long_name = program("long_name", f"get_character('{name}').set_target_action('eat')\n")
    with OpenAIServer(RunScript([ScriptedRun("run0", narrator_json("run0", "eat"), long_name)])) as server:
        code, stderr = _run(server.base_url, tmp_path / "small", capsys, "--max-text-chars", "100")
        assert code == 0, stderr
    (record,) = read_results(tmp_path / "small")
    assert name in record["plan"] and "plan" not in record["truncated"]
