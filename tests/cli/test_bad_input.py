"""Every command, given bad input, fails with one clear line on stderr and a non-zero exit code (2 for usage errors),
never a traceback, and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.llm import check_model
from edsb.llm.factory import CHECK_REQUEST, UNCAPPED_TIMEOUT_FIX
from edsb.llm.retry import RetryPolicy
from tests.cli.conftest import rewrite_case
from tests.support.openai_server import OpenAIServer, Reply

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
RUN = ("run", "--model", "openai:x", "--base-url", UNREACHABLE, "--cases", "13", "--distraction", "0")

# (arguments, expected exit code, text the error line must contain). `{tmp}` is the test's directory.
USAGE_ERRORS = {
    # The command line itself.
    "unknown command": (("nosuch",), "No such command"),
    "unknown option": (("cases", "--nosuch"), "No such option: --nosuch"),
    "missing argument": (("score",), "Missing argument"),
    "option without value": (("run", "--cases"), "requires an argument"),
    "Inspect's name of an option": (
        ("run", "--levels", "0"),
        "No such option: --levels (did you mean '--distraction'?)",
    ),
    "misspelt option": (
        ("run", "--distractoin", "0"),
        "No such option: --distractoin (Possible options: --distraction)",
    ),
    "Inspect's name, no such option here": (("cases", "--levels", "0"), "No such option: --levels (see"),
    # Unknown ids, tags, variants, levels, presets.
    "cases: unknown id": (("cases", "--cases", "999"), "unknown case id 999"),
    "cases: unknown selector": (("cases", "--cases", "ZZ"), "unknown case selector 'ZZ'"),
    "cases: empty range": (("cases", "--cases", "5-3"), "empty case range"),
    "cases: empty selection": (("cases", "--cases", ""), "empty case selection"),
    "run: empty selection": ((*RUN[:-4], "--cases", "", "--out", "{tmp}/run"), "empty case selection"),
    "run: empty item": ((*RUN[:-4], "--cases", "13,,60", "--out", "{tmp}/run"), "empty item in case selection"),
    "run: empty levels": ((*RUN[:-2], "--distraction", "", "--out", "{tmp}/run"), "empty distraction level"),
    "cases: unknown tag": (("cases", "--tag", "XX"), "--tag': 'XX' is not one of 'OA', 'RC', 'SS', 'PI'"),
    "run: unknown id": ((*RUN[:-4], "--cases", "999", "--out", "{tmp}/run"), "unknown case id 999"),
    "run: unknown tag": ((*RUN[:-4], "--cases", "ZZ", "--out", "{tmp}/run"), "unknown case selector"),
    "run: unknown variant": (
        (*RUN, "--variant", "nope", "--out", "{tmp}/run"),
        "--variant': 'nope' is not one of 'ours', 'wo-event'",
    ),
    "run: unknown level": ((*RUN[:-2], "--distraction", "7", "--out", "{tmp}/run"), "distraction level 7"),
    "run: level not a number": ((*RUN[:-2], "--distraction", "x", "--out", "{tmp}/run"), "distraction levels"),
    "run: unknown preset": (
        (*RUN, "--preset", "nope", "--out", "{tmp}/run"),
        "--preset': 'nope' is not one of 'table1', 'table2'",
    ),
    # Numbers out of range.
    "run: negative repeats": ((*RUN, "--repeats", "-1", "--out", "{tmp}/run"), "--repeats"),
    "run: zero repeats": ((*RUN, "--repeats", "0", "--out", "{tmp}/run"), "--repeats"),
    "run: zero concurrency": ((*RUN, "--concurrency", "0", "--out", "{tmp}/run"), "--concurrency"),
    "run: negative temperature": ((*RUN, "--temperature", "-1", "--out", "{tmp}/run"), "--temperature"),
    "run: zero timeout": ((*RUN, "--timeout", "0", "--out", "{tmp}/run"), "timeout (--timeout)"),
    "run: zero batch poll": ((*RUN, "--batch-poll", "0", "--out", "{tmp}/run"), "batch_poll_s (--batch-poll)"),
    "run: negative retries": ((*RUN, "--max-retries", "-1", "--out", "{tmp}/run"), "--max-retries"),
    "run: zero code timeout": ((*RUN, "--code-timeout", "0", "--out", "{tmp}/run"), "code_timeout (--code-timeout)"),
    "run: negative code timeout": ((*RUN, "--code-timeout", "-1", "--out", "{tmp}/run"), "code_timeout"),
    "run: tiny code memory": ((*RUN, "--code-memory", "10", "--out", "{tmp}/run"), "--code-memory"),
    "run: zero plan characters": ((*RUN, "--max-plan-characters", "0", "--out", "{tmp}/run"), "--max-plan-characters"),
    "run: tiny error messages": ((*RUN, "--max-error-chars", "10", "--out", "{tmp}/run"), "--max-error-chars"),
    "run: repeats not a number": ((*RUN, "--repeats", "many", "--out", "{tmp}/run"), "--repeats"),
    # Unusable --out.
    "run: --out is a file": ((*RUN, "--out", "{tmp}/a-file"), "--out"),
    "run: --out under a file": ((*RUN, "--out", "{tmp}/a-file/run"), "--out"),
    "run: --out where nothing can be made": ((*RUN, "--out", "/proc/edsb-run"), "--out"),
    # Config files.
    "run: missing config": ((*RUN, "--config", "{tmp}/nope.toml", "--out", "{tmp}/run"), "nope.toml"),
    "run: broken config": ((*RUN, "--config", "{tmp}/broken.toml", "--out", "{tmp}/run"), "invalid config file"),
    "run: config value of a wrong type": ((*RUN, "--config", "{tmp}/wrong.toml", "--out", "{tmp}/run"), "repeats"),
    "run: unknown config key": ((*RUN, "--config", "{tmp}/unknown.toml", "--out", "{tmp}/run"), "unknown key 'nosuch'"),
    "run: misspelt config key": (
        (*RUN, "--config", "{tmp}/typo.toml", "--out", "{tmp}/run"),
        "typo.toml: unknown key 'modle' (did you mean 'model'?)",
    ),
    "run: misspelt option key in [run]": (
        (*RUN, "--config", "{tmp}/typo-run.toml", "--out", "{tmp}/run"),
        "unknown key 'base-ulr' (did you mean 'base-url'?)",
    ),
    # Models.
    "run: malformed model": (("run", "--model", "bogus", "--cases", "13", "--out", "{tmp}/run"), "unknown model spec"),
    "run: misspelt model name": (
        ("run", "--model", "oracel", "--cases", "13", "--out", "{tmp}/run"),
        "oracle or oracle-wrong (did you mean 'oracle'?)",
    ),
    "run: misspelt model prefix": (
        ("run", "--model", "opanai:gpt-4o", "--cases", "13", "--out", "{tmp}/run"),
        "(did you mean 'openai:gpt-4o'?)",
    ),
    "run: unset key variable": ((*RUN, "--api-key-env", "EDSB_NO_SUCH_KEY", "--out", "{tmp}/run"), "EDSB_NO_SUCH_KEY"),
    "check-model: malformed model": (("check-model", "--model", "bogus"), "unknown model spec"),
    "check-model: negative timeout": (("check-model", "--model", "openai:x", "--timeout", "-1"), "--timeout"),
    # Cases to draw.
    "show: unknown id": (
        ("show", "99", "-o", "{tmp}/99.png"),
        "unknown case id 99 (valid ids: 0-4, 10-14, 20-24, 30-34, 40-44, 50-54, 60-69)",
    ),
    # Data.
    "data fetch: --archive a directory": (
        ("data", "fetch", "--archive", "{tmp}", "--dest", "{tmp}/data"),
        "is a directory, not an archive file; for benchmark files already unpacked there, pass `--data ",
    ),
    # Files to score.
    "score: missing file": (("score", "{tmp}/nope.jsonl"), "cannot read"),
    "score: a directory": (("score", "{tmp}"), "cannot read"),
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "broken.toml").write_text("repeats = [\n")
    (tmp_path / "wrong.toml").write_text('repeats = "x"\n')
    (tmp_path / "unknown.toml").write_text("nosuch = 1\n")
    (tmp_path / "typo.toml").write_text('modle = "oracle"\n')
    (tmp_path / "typo-run.toml").write_text('[run]\nbase-ulr = "http://127.0.0.1:9/v1"\n')
    return tmp_path


@pytest.mark.parametrize(
    ("args", "contains"),
    [pytest.param(*case, id=name) for name, case in USAGE_ERRORS.items()],
)
def test_usage_errors(edsb, files: Path, args: tuple[str, ...], contains: str) -> None:
    before = sorted(p.name for p in files.iterdir())
    outcome = edsb(*(arg.replace("{tmp}", str(files)) for arg in args))
    outcome.assert_one_clear_error(2, contains=contains)
    assert outcome.stdout == ""
    assert sorted(p.name for p in files.iterdir()) == before  # no run directory, no stray file


DATA_COMMANDS = {
    "data check": ("data", "check"),
    "cases": ("cases",),
    "score": ("score", "{tmp}/plans.jsonl"),
    "run": (*RUN, "--out", "{tmp}/run"),
}


@pytest.mark.parametrize("command", list(DATA_COMMANDS.values()), ids=list(DATA_COMMANDS))
@pytest.mark.parametrize("where", ["missing", "a file"])
def test_no_data_directory(edsb, files: Path, command: tuple[str, ...], where: str) -> None:
    (files / "plans.jsonl").write_text('{"case": 13, "plan": {}}\n')
    data = files / ("nope" if where == "missing" else "a-file")
    outcome = edsb(*(arg.replace("{tmp}", str(files)) for arg in command), "--data", data)
    outcome.assert_one_clear_error(1, contains=f"no benchmark data at {data}")
    assert not (files / "run").exists()


@pytest.mark.parametrize("command", list(DATA_COMMANDS.values()), ids=list(DATA_COMMANDS))
@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (rewrite_case(tags="RC"), "tags: Input should be a valid list"),
        (rewrite_case(id="thirteen"), "id:"),
        (rewrite_case(expected_plans={"David": "eat"}), "expected_plans"),
        (lambda path: path.write_text('{"id": 13, "tags": ['), "invalid JSON"),
    ],
    ids=["tags not a list", "id not a number", "plans not a list", "truncated JSON"],
)
def test_corrupt_case_file(edsb, files: Path, damaged_data, command: tuple[str, ...], damage, problem: str) -> None:
    (files / "plans.jsonl").write_text('{"case": 13, "plan": {}}\n')
    data = damaged_data(damage)
    outcome = edsb(*(arg.replace("{tmp}", str(files)) for arg in command), "--data", data)
    assert outcome.returncode == 1
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("edsb: error: ")]
    assert len(errors) == 1 and "testcase_13.json" in errors[0] and problem in errors[0], outcome.stderr
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert not (files / "run").exists()


def test_check_model_that_cannot_answer_prints_json_and_one_error_line(edsb) -> None:
    with OpenAIServer(lambda request: Reply.error(403, "model not enabled for this key")) as server:
        outcome = edsb("check-model", "--model", "openai:x", "--base-url", server.base_url)
    outcome.assert_one_clear_error(1, contains="http 403 after 1 attempt: model not enabled for this key")
    answer = json.loads(outcome.stdout)
    assert answer["ok"] is False and answer["error"] in outcome.stderr


def test_check_model_that_times_out_uncapped_names_max_tokens(edsb, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that never finishes (a small model generating without a cap): the error says which option helps;
    with a cap sent, the cap is not what it blames."""
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIServer(lambda request: Reply.hang()) as server:
        outcome = edsb("check-model", "--model", "openai:x", "--base-url", server.base_url, "--timeout", "0.1")
        capped = check_model(
            "openai:x", base_url=server.base_url, timeout=0.1, retry=RetryPolicy(max_retries=0),
            request=CHECK_REQUEST.model_copy(update={"max_tokens": 64}),
        )  # fmt: skip
        sent = [request.json() for request in server.chat_requests]
    outcome.assert_one_clear_error(1, contains="no complete response within 0.1 s fix: no token cap was sent")
    assert "try --max-tokens 64" in outcome.stderr and "max_tokens" not in sent[0]
    assert json.loads(outcome.stdout)["fix"] == UNCAPPED_TIMEOUT_FIX
    assert capped["ok"] is False and "fix" not in capped and "within 0.1 s" in capped["error"]
    assert sent[-1]["max_tokens"] == 64


@pytest.mark.parametrize(
    ("option", "contains"),
    [(("--api-key-env", "EDSB_NO_SUCH_KEY"), "EDSB_NO_SUCH_KEY"), (("--model", "replay:/nonexistent"), "replay")],
    ids=["unset key variable", "missing replay directory"],
)
def test_check_model_bad_settings(edsb, option: tuple[str, str], contains: str) -> None:
    args = ["check-model", "--model", "openai:x", *option]
    outcome = edsb(*args)
    outcome.assert_one_clear_error(1, contains=contains)
    assert json.loads(outcome.stdout)["ok"] is False


@pytest.mark.parametrize(
    ("dest", "url", "contains"),
    [
        ("{tmp}/a-file/data", "http://127.0.0.1:9/archive.tar.gz", "a-file"),
        ("{tmp}/data", "http://127.0.0.1:9/archive.tar.gz", "cannot reach"),
        ("{tmp}/data", "not-a-url", "cannot reach"),
        ("{tmp}/data", "{server}/archive.tar.gz", "download"),
    ],
    ids=["dest under a file", "unreachable", "not a URL", "404"],
)
def test_data_fetch_failures(edsb, files: Path, dest: str, url: str, contains: str) -> None:
    with OpenAIServer() as server:
        url = url.replace("{server}", server.base_url.removesuffix("/v1"))
        outcome = edsb("data", "fetch", "--dest", dest.replace("{tmp}", str(files)), "--url", url)
    outcome.assert_one_clear_error(1, contains=contains)
    assert not (files / "data").exists()


def test_score_reports_a_torn_last_line_on_its_own_line(edsb, files: Path) -> None:
    """A plans file cut short: every whole line is scored, the torn one gets an `invalid_input` verdict."""
    plans = files / "plans.jsonl"
    good = {"case": 13, "plan": {"David": {"target_action": ["eat"], "relationships": ["sit on chair_2"]}}}
    plans.write_text(json.dumps(good) + "\n" + json.dumps(good)[:25])
    outcome = edsb("score", plans)
    assert outcome.returncode == 0 and "Traceback" not in outcome.stderr
    first, second = (json.loads(line) for line in outcome.stdout.splitlines())
    assert first["passed"] is True
    assert second["passed"] is False and second["error"].startswith("invalid_input: line 2")
    assert "1 invalid lines skipped" in outcome.stderr


def test_replaying_a_run_that_was_never_recorded_says_so(edsb, tmp_path: Path) -> None:
    """Not "the code, the data or the options differ": the run is simply not in the directory, which says so before
    anything runs, and leaves no run directory behind."""
    one = ("--distraction", "0", "--quiet")
    assert edsb("run", "--model", "oracle", "--cases", "13", *one, "--out", "recorded").returncode == 0
    outcome = edsb("run", "--model", "replay:recorded", "--cases", "13,60", *one, "--out", "again")
    outcome.assert_one_clear_error(
        1, contains="1 of the 2 runs asked for is not recorded in recorded (ours/tc60-d0-r0); it holds ours/tc13-d0-r0"
    )
    assert "the code, the data" not in outcome.stderr and not (tmp_path / "again").exists()
    assert edsb("run", "--model", "replay:recorded", "--cases", "13", *one, "--out", "again").returncode == 0
