"""`edsb run --config`: every option from a file, the command line on top, config.json as the run's identity."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from edsb.cli import main
from edsb.errors import UsageError
from edsb.llm import read_transcripts
from edsb.llm.local import DEFAULT_MAX_TOKENS as LOCAL_MAX_TOKENS
from edsb.planning.variants import SamplerName
from edsb.results import RunKey
from edsb.results.migrate import CONFIG_FORMAT
from edsb.results.rundir import CONFIG_FILE
from edsb.runner.config import (
    IDENTITY_FIELDS,
    RunConfig,
    check_resume,
    default_out_dir,
    load_config_file,
    load_session_options,
    read_config,
    resolve_run_config,
)
from edsb.runner.keys import longest_first
from tests.support.data import DATA
from tests.support.edsb_cli import scripted_run_child
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply, completion_payload
from tests.support.run_dir import records_by_key

# Every option of `edsb run` but --config itself, in command-line spelling.
FULL_FILE = f"""
# a comment, and a table other tools may share the file with
[run]
model = "openai:scripted"
base-url = "http://127.0.0.1:9/v1"
api-key-env = "EDSB_TEST_KEY"
variant = ["scene-graph", "object-list"]
cases = "OA,13"
distraction = "0-1"
repeats = 2
temperature = 0.3
max-tokens = 900
model-seed = 4
seed = 7
concurrency = 3
timeout = 12.5
max-retries = 1
code-timeout = 4.0
code-memory = 512
max-plan-characters = 10
max-plan-relationships = 11
max-plan-string-chars = 120
max-error-chars = 500
max-text-chars = 600
no-cache = true
data = "{DATA}"
out = "runs/from-file"
quiet = true

[other-tool]
ignored = 1
"""

NO_OPTIONS: dict[str, object] = {
    name: None
    for name in (
        "model",
        "base_url",
        "api_key_env",
        "variants",
        "preset",
        "cases",
        "distraction",
        "repeats",
        "temperature",
        "max_tokens",
        "model_seed",
        "seed",
        "concurrency",
        "timeout",
        "max_retries",
        "code_timeout",
        "code_memory_mb",
        "max_plan_characters",
        "max_plan_relationships",
        "max_plan_string_chars",
        "max_error_chars",
        "max_text_chars",
        "cache",
        "data",
    )
}


def _write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_option_can_come_from_a_run_table(tmp_path: Path) -> None:
    config = resolve_run_config(dict(NO_OPTIONS), _write(tmp_path, FULL_FILE))
    assert config.model == "openai:scripted"
    assert config.base_url == "http://127.0.0.1:9/v1"
    assert config.api_key_env == "EDSB_TEST_KEY"
    assert config.variants == ["scene-graph", "object-list"]
    assert config.cases == [0, 1, 2, 3, 4, 13, 30, 31, 32, 33, 34, 40, 41, 42, 43, 44]
    assert config.distraction == [0, 1]
    assert (config.repeats, config.generation.temperature, config.seed, config.concurrency) == (2, 0.3, 7, 3)
    assert (config.generation.max_tokens, config.generation.model_seed) == (900, 4)
    assert (config.timeout, config.max_retries, config.code_timeout, config.code_memory_mb) == (12.5, 1, 4.0, 512)
    assert (config.plan_limits.characters, config.plan_limits.relationships, config.plan_limits.string_chars) == (
        10,
        11,
        120,
    )
    assert (config.text_limits.error_chars, config.text_limits.text_chars) == (500, 600)
    assert config.cache is False
    assert config.data == str(Path(DATA).resolve())
    assert load_session_options(_write(tmp_path, FULL_FILE)) == {"out": "runs/from-file", "quiet": True}


def test_command_line_options_override_the_file(tmp_path: Path) -> None:
    options = {**NO_OPTIONS, "cases": "60-61", "seed": 11, "variants": ["direct"], "concurrency": 1}
    config = resolve_run_config(options, _write(tmp_path, FULL_FILE))
    assert (config.cases, config.seed, config.variants, config.concurrency) == ([60, 61], 11, ["direct"], 1)
    assert config.repeats == 2 and config.generation.temperature == 0.3  # the rest still comes from the file


def test_top_level_options_field_names_and_scalars(tmp_path: Path) -> None:
    path = _write(tmp_path, 'model = "openai:m"\nvariants = "wo-event"\ncases = 13\ndistraction = 2\ncache = false\n')
    config = resolve_run_config(dict(NO_OPTIONS), path)
    assert (config.model, config.variants, config.cases, config.distraction) == ("openai:m", ["wo-event"], [13], [2])
    assert config.cache is False


def test_presets_file_then_command_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '[run]\npreset = "table1"\nrepeats = 1\n')
    from_file = resolve_run_config(dict(NO_OPTIONS), path)
    assert len(from_file.variants) == 4 and 60 not in from_file.cases and from_file.repeats == 1
    from_command_line = resolve_run_config({**NO_OPTIONS, "preset": "table2"}, path)
    assert from_command_line.variants == ["scene-graph", "direct"] and from_command_line.cases == list(range(60, 70))
    assert from_command_line.repeats == 1  # the file's explicit value still beats the preset's


def test_a_previous_runs_config_json_works_as_a_config_file(tmp_path: Path) -> None:
    original = RunConfig(model="openai:m", cases=[13], distraction=[1], seed=3, data=str(DATA), edsb_version="0.0.1")
    path = _write(tmp_path, original.model_dump_json(), CONFIG_FILE)
    again = resolve_run_config(dict(NO_OPTIONS), path)
    assert again.identity() == original.identity()
    assert again.edsb_version != "0.0.1"  # the version is always the running one


def test_the_sampler_defaults_to_the_reference_and_is_part_of_the_identity(tmp_path: Path) -> None:
    assert resolve_run_config(dict(NO_OPTIONS)).sampler is SamplerName.REFERENCE
    path = _write(tmp_path, 'sampler = "optimal"')
    assert resolve_run_config(dict(NO_OPTIONS), path).sampler is SamplerName.OPTIMAL
    assert resolve_run_config({**NO_OPTIONS, "sampler": "reference"}, path).sampler is SamplerName.REFERENCE
    with pytest.raises(UsageError, match="sampler") as raised:
        resolve_run_config(dict(NO_OPTIONS), _write(tmp_path, 'sampler = "best"'))
    assert "\n" not in str(raised.value).strip()
    assert "sampler" in IDENTITY_FIELDS
    assert RunConfig(sampler=SamplerName.OPTIMAL).identity()["sampler"] == "optimal"  # plain JSON, as on disk


def test_a_config_json_written_before_the_sampler_choice_reads_as_the_optimiser(tmp_path: Path) -> None:
    written = RunConfig(model="openai:m", seed=3).model_dump(mode="json")
    assert written["sampler"] == "reference"
    del written["sampler"]
    path = _write(tmp_path, json.dumps(written), CONFIG_FILE)
    assert read_config(path).sampler is SamplerName.OPTIMAL
    assert read_config(path).seed == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('api-key = "sk-secret"', "environment variables"),
        ('[run]\nopenai_api_key = "sk-secret"', "environment variables"),
        ("colour = 3", "colour"),
        ("repeats = 0", "repeats"),
        ("cases = true", "cases"),
        ('config = "other.toml"', "config"),
        ("run = 3", "[run] must be a table"),
        ("model = ", "invalid config file"),
    ],
)
def test_bad_files_are_refused_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")) as raised:
        resolve_run_config(dict(NO_OPTIONS), _write(tmp_path, text))
    assert "\n" not in str(raised.value).strip()
    assert "sk-secret" not in str(raised.value)


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read config file"):
        load_config_file(tmp_path / "absent.toml")


def test_run_with_config_file_writes_the_resolved_config_without_secrets(
    scripted_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    secret = "sk-edsb-test-0123456789abcdef"
    monkeypatch.setenv("EDSB_TEST_KEY", secret)
    monkeypatch.chdir(tmp_path)
    path = _write(
        tmp_path,
        '[run]\nmodel = "openai:scripted"\napi-key-env = "EDSB_TEST_KEY"\ncases = "13"\ndistraction = "0"\n'
        'seed = 5\nconcurrency = 2\nout = "from-file"\nquiet = true\n',
    )
    options = ("--config", str(path), "--out", "cli-out")
    result = scripted_run_child(scripted_server.base_url, tmp_path / "unused", private_cache, *options)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "cli-out"  # --out on the command line beats the file's `out`
    assert not (tmp_path / "from-file").exists()
    written = json.loads((out / CONFIG_FILE).read_text())
    assert written["api_key_env"] == "EDSB_TEST_KEY" and written["seed"] == 5 and written["cases"] == [13]
    assert written["base_url"] == scripted_server.base_url and "out" not in written and "quiet" not in written
    assert written.pop("format") == CONFIG_FORMAT and RunConfig.model_validate(written).concurrency == 2
    assert all(request.headers["authorization"] == f"Bearer {secret}" for request in scripted_server.chat_requests)
    for file in out.rglob("*"):
        if file.is_file():
            assert secret not in file.read_text(encoding="utf-8", errors="replace"), file
    assert "runs 1/1" not in result.stderr  # quiet from the file: no progress lines


def _edsb(argv: list[str]) -> int:
    """`edsb ...` in this process; its exit code."""
    try:
        main(argv)
    except SystemExit as exited:
        return int(exited.code or 0)
    return 0


def test_resume_refuses_a_different_run_and_accepts_other_settings(
    scripted_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    base = ["run", "--model", "openai:scripted", "--base-url", scripted_server.base_url, "--out", str(out)]
    selection = ["--cases", "13", "--distraction", "0", "--no-cache", "--quiet"]
    assert _edsb([*base, *selection]) == 0
    assert len(records_by_key(out)) == 1
    capsys.readouterr()

    assert _edsb([*base, *selection, "--seed", "1"]) == 2
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0 and "seed was 0, now 1" in message and str(out) in message

    assert _edsb([*base, *selection, "--temperature", "0.5"]) == 2
    assert "temperature was 0.1, now 0.5" in capsys.readouterr().err

    # Settings that do not change results may differ on a resume.
    assert _edsb([*base, *selection, "--concurrency", "7", "--max-retries", "0"]) == 0
    assert "1 run planned, 1 already done, 0 executed" in capsys.readouterr().err
    assert len(records_by_key(out)) == 1


def test_a_resume_with_another_model_is_named_for_the_model(tmp_path: Path) -> None:
    # Another model brings other defaults (the embedded model's cap and seed): the model is what differs.
    check_resume(tmp_path, resolve_run_config({**NO_OPTIONS, "model": "local"}))
    with pytest.raises(UsageError, match=r"model was 'local', now 'anthropic:claude'"):
        check_resume(tmp_path, resolve_run_config({**NO_OPTIONS, "model": "anthropic:claude"}))


@pytest.mark.parametrize(
    ("model", "cap", "seed"),
    [
        ("local", LOCAL_MAX_TOKENS, 0),  # the embedded model's own cap, seeded with the repeat number
        ("openai:m", None, None),  # as the paper's client: no cap, no seed
        ("deepinfra:meta-llama/Meta-Llama-3.1-70B-Instruct", None, None),
        ("anthropic:claude", 2048, None),
        ("google:gemini", 2048, None),
        ("oracle", None, None),
    ],
)
def test_generation_settings_default_to_what_each_model_is_sent(model: str, cap: int | None, seed: int | None) -> None:
    config = resolve_run_config({**NO_OPTIONS, "model": model})
    assert (config.generation.max_tokens, config.generation.model_seed) == (cap, seed)
    given = resolve_run_config({**NO_OPTIONS, "model": model, "max_tokens": 77})
    assert given.generation.max_tokens == 77
    assert {"max_tokens", "model_seed"} <= set(config.identity())


def test_a_seed_for_a_model_that_takes_none_is_refused() -> None:
    with pytest.raises(UsageError, match="takes no sampling seed") as raised:
        resolve_run_config({**NO_OPTIONS, "model": "anthropic:claude", "model_seed": 3})
    assert "\n" not in str(raised.value) and "Anthropic's Messages API has none" in str(raised.value)
    with pytest.raises(UsageError, match=r"\(OpenAI's Responses API has none\)"):
        resolve_run_config({**NO_OPTIONS, "model": "openai-responses:gpt-5", "model_seed": 3})
    assert resolve_run_config({**NO_OPTIONS, "model": "google:gemini", "model_seed": 3}).generation.model_seed == 3


def test_a_replay_sends_what_its_recorded_run_sent(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    (recorded / CONFIG_FILE).write_text(RunConfig(model="local", max_tokens=1024, model_seed=0).model_dump_json())
    config = resolve_run_config({**NO_OPTIONS, "model": f"replay:{recorded}"})
    assert (config.generation.max_tokens, config.generation.model_seed) == (1024, 0)


def test_a_local_config_json_written_before_max_tokens_reads_as_its_old_cap(tmp_path: Path) -> None:
    written = RunConfig(model="local", seed=3).model_dump(mode="json")
    del written["max_tokens"], written["model_seed"]
    path = _write(tmp_path, json.dumps(written), CONFIG_FILE)
    assert (read_config(path).generation.max_tokens, read_config(path).generation.model_seed) == (512, 0)
    remote = RunConfig(model="openai:m").model_dump(mode="json")
    del remote["max_tokens"], remote["model_seed"]
    path = _write(tmp_path, json.dumps(remote), CONFIG_FILE)
    assert (read_config(path).generation.max_tokens, read_config(path).generation.model_seed) == (None, None)


def test_requests_and_transcripts_carry_the_cap_and_seed_as_sent(
    scripted_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    base = ["run", "--model", "openai:scripted", "--base-url", scripted_server.base_url, "--out", str(out)]
    selection = ["--cases", "13", "--distraction", "0", "--repeats", "2", "--no-cache", "--quiet"]
    assert _edsb([*base, *selection, "--max-tokens", "300", "--model-seed", "7"]) == 0
    bodies = [request.json() for request in scripted_server.chat_requests]
    assert bodies and {body["max_tokens"] for body in bodies} == {300}
    assert {body["seed"] for body in bodies} == {7, 8}  # repeat r sends model_seed + r
    records = read_transcripts(out)
    assert records and all(r.request.seed is not None for r in records)
    assert {(r.request.max_tokens, (r.request.seed or 0) - r.request.sample_index) for r in records} == {(300, 7)}
    written = json.loads((out / CONFIG_FILE).read_text())
    assert (written["max_tokens"], written["model_seed"]) == (300, 7)
    capsys.readouterr()
    assert _edsb([*base, *selection]) == 2  # a different cap and seed are a different run
    assert "max_tokens was 300, now None (pass --max-tokens 300" in capsys.readouterr().err


def test_a_replay_without_options_sends_the_recorded_cap_and_seed(
    scripted_server: OpenAIServer, tmp_path: Path
) -> None:
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    base = ["run", "--model", "openai:scripted", "--base-url", scripted_server.base_url, "--out", str(recorded)]
    selection = ["--cases", "13", "--distraction", "0-1", "--no-cache", "--quiet"]
    assert _edsb([*base, *selection, "--max-tokens", "300", "--model-seed", "7"]) == 0
    assert _edsb(["run", "--model", f"replay:{recorded}", "--out", str(replayed), *selection]) == 0
    again = {key: record["status"] for key, record in records_by_key(replayed).items()}
    assert again == {key: record["status"] for key, record in records_by_key(recorded).items()}
    assert {(r.request.max_tokens, r.request.seed) for r in read_transcripts(replayed)} == {(300, 7)}


def test_openai_sends_no_cap_and_no_seed_by_default(scripted_server: OpenAIServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["run", "--model", "openai:scripted", "--base-url", scripted_server.base_url, "--out", str(out)]
    assert _edsb([*argv, "--cases", "13", "--distraction", "0", "--no-cache", "--quiet"]) == 0
    assert all(not {"max_tokens", "seed"} & request.json().keys() for request in scripted_server.chat_requests)


def test_a_reply_cut_at_the_token_cap_says_so(tmp_path: Path) -> None:
    def cut(request: RecordedRequest) -> Reply:
        return Reply.completion('{"reasoning": "David is hungry and', finish_reason="length")

    out = tmp_path / "run"
    with OpenAIServer(cut) as server:
        argv = ["run", "--model", "openai:m", "--base-url", server.base_url, "--out", str(out), "--max-tokens", "50"]
        assert _edsb([*argv, "--cases", "13", "--distraction", "0", "--no-cache", "--quiet"]) == 0
    [record] = records_by_key(out).values()
    assert record["error_kind"] == "narrator_format"
    assert "the narrator reply stopped at the token cap of 50" in record["error"]


def test_a_reply_cut_while_thinking_says_how_much_of_the_cap_thinking_used(tmp_path: Path) -> None:
    def cut(request: RecordedRequest) -> Reply:
        payload = completion_payload(None, 900, 300, "length", "o4-mini-2025-04-16")
        payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": 300}
        return Reply.json(payload)

    out = tmp_path / "run"
    with OpenAIServer(cut) as server:
        argv = ["run", "--model", "openai:o4-mini", "--base-url", server.base_url, "--out", str(out)]
        selection = ["--cases", "13", "--distraction", "0", "--no-cache", "--quiet", "--temperature", "default"]
        assert _edsb([*argv, *selection, "--max-tokens", "300"]) == 0
        [request] = server.chat_requests
    assert request.json()["max_completion_tokens"] == 300
    [record] = records_by_key(out).values()
    assert record["error_kind"] == "narrator_format"
    assert "stopped at the token cap of 300" in record["error"]
    assert "narrator: thinking used 300 tokens of the 300-token cap" in record["error"]
    assert record["tokens"]["narrator"] == {"prompt": 900, "completion": 300, "reasoning": 300}


def test_runs_with_two_model_calls_start_before_those_with_one() -> None:
    keys = [RunKey(variant, case, 0, 0) for variant in ("wo-event", "ours", "object-list") for case in (1, 2)]
    ordered = longest_first(keys)
    assert [key.id for key in ordered] == [
        "ours/tc01-d0-r0",
        "ours/tc02-d0-r0",
        "object-list/tc01-d0-r0",
        "object-list/tc02-d0-r0",
        "wo-event/tc01-d0-r0",
        "wo-event/tc02-d0-r0",
    ]


def test_the_default_run_directory_ends_in_a_random_suffix() -> None:
    when = datetime(2026, 12, 6, 5, 4, 3)
    names = {default_out_dir("openai:gpt-4o", when).name for _ in range(8)}
    assert len(names) == 8  # 24 random bits each: a clash among eight is about one in two million
    assert all(re.fullmatch(r"openai-gpt-4o-261206-050403-[0-9a-f]{6}", name) for name in names)
    assert default_out_dir("oracle", when, suffix="abc123") == Path("runs/oracle-261206-050403-abc123")
