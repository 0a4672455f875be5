"""The generation options of `edsb run` and `edsb check-model`: sent as given, recorded, part of the run's identity,
and refused in one line before any request where the provider's API is known to refuse them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edsb.llm import read_transcripts
from edsb.llm.rules import DEFAULT_EFFORT, anthropic_api
from tests.support.edsb_cli import Outcome
from tests.support.openai_server import OpenAIServer, Reply

QUIET = ("--no-cache", "--max-retries", "0", "--quiet", "--concurrency", "1")
ONE_RUN = ("--cases", "13", "--distraction", "0")
OPTIONS = ("--temperature", "0.7", "--model-seed", "3", "--max-tokens", "900", "--no-json-mode")


def _run(edsb: Callable[..., Outcome], server: OpenAIServer, out: Path, *options: str) -> Outcome:
    return edsb("run", "--model", "openai:m", "--base-url", server.base_url, *ONE_RUN, *QUIET, "--out", out, *options)


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    return {name: body.get(name) for name in ("temperature", "seed", "max_tokens", "response_format")}


def test_run_sends_and_records_the_options(edsb: Callable[..., Outcome], openai_server: OpenAIServer) -> None:
    outcome = _run(edsb, openai_server, Path("out"), *OPTIONS)
    assert outcome.returncode == 0, outcome.stderr
    bodies = [request.json() for request in openai_server.chat_requests]
    assert bodies and all(
        _settings(b) == {**_settings({}), "temperature": 0.7, "seed": 3, "max_tokens": 900} for b in bodies
    )
    config = json.loads(Path("out/config.json").read_text())
    assert (config["temperature"], config["model_seed"], config["max_tokens"], config["json_mode"]) == (
        0.7,
        3,
        900,
        False,
    )
    assert config["reasoning_effort"] is None and config["thinking_budget"] is None


def test_check_model_sends_the_request_a_run_sends(edsb: Callable[..., Outcome], openai_server: OpenAIServer) -> None:
    for options in (OPTIONS, ()):  # the given settings, and the paper's defaults (JSON mode on the Narrator)
        first = len(openai_server.chat_requests)
        assert _run(edsb, openai_server, Path(f"out{len(options)}"), *options).returncode == 0
        narrator = openai_server.chat_requests[first].json()
        outcome = edsb("check-model", "--model", "openai:m", "--base-url", openai_server.base_url, *options)
        assert outcome.returncode == 0, outcome.stderr
        check = openai_server.chat_requests[-1].json()
        assert _settings(check) == _settings(narrator)
        assert set(check) == set(narrator)  # no other field either


def test_a_resume_with_other_settings_is_refused(edsb: Callable[..., Outcome], openai_server: OpenAIServer) -> None:
    assert _run(edsb, openai_server, Path("out"), "--no-json-mode").returncode == 0
    sent = len(openai_server.chat_requests)
    _run(edsb, openai_server, Path("out")).assert_one_clear_error(2, contains="json_mode was False")
    _run(edsb, openai_server, Path("out")).assert_one_clear_error(2, contains="pass --no-json-mode")
    assert _run(edsb, openai_server, Path("tdef"), "--temperature", "default").returncode == 0
    _run(edsb, openai_server, Path("tdef")).assert_one_clear_error(2, contains="pass --temperature default")
    assert json.loads(Path("tdef/config.json").read_text())["temperature"] is None
    assert len(openai_server.chat_requests) > sent


REFUSED = {
    "thinking level beyond gemini": ("openai:m", ("--thinking-level", "low"), "--thinking-level is Gemini 3's"),
    "thinking budget on openai": ("openai:m", ("--thinking-budget", "2048"), "use --reasoning-effort here"),
    "effort on gemini": ("google:g", ("--reasoning-effort", "low"), "not --reasoning-effort"),
    "budget and level": ("google:g", ("--thinking-budget", "1", "--thinking-level", "low"), "not both"),
    "small anthropic budget": ("anthropic:c", ("--thinking-budget", "512"), "at least 1024 tokens"),
    "reasoning on the embedded model": ("local", ("--reasoning-effort", "low"), "apply to a provider's models"),
    "temperature that is no number": ("openai:m", ("--temperature", "warm"), "--temperature"),
    "temperature out of range": ("openai:m", ("--temperature", "3"), "not in the range 0 to 2"),
}


@pytest.mark.parametrize("command", ["run", "check-model"])
@pytest.mark.parametrize(("model", "options", "contains"), REFUSED.values(), ids=REFUSED.keys())
def test_settings_the_api_refuses_are_one_line_before_any_request(
    edsb: Callable[..., Outcome],
    openai_server: OpenAIServer,
    command: str,
    model: str,
    options: tuple[str, ...],
    contains: str,
) -> None:
    base = () if model == "local" else ("--base-url", openai_server.root_url)
    selection = (*ONE_RUN, *QUIET) if command == "run" else ()
    outcome = edsb(command, "--model", model, *base, *options, *selection)
    outcome.assert_one_clear_error(2, contains=contains)
    assert not openai_server.requests
    assert not Path("runs").exists()


@pytest.mark.skipif(anthropic_api()[1], reason="the installed anthropic SDK's API version has a temperature")
def test_anthropic_gets_no_temperature_and_an_explicit_one_is_refused(
    edsb: Callable[..., Outcome], openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    model = ("--model", "anthropic:claude-sonnet-4-5", "--base-url", openai_server.root_url)
    version = anthropic_api()[0]
    for command in ("run", "check-model"):
        outcome = edsb(command, *model, "--temperature", "0.1", *(ONE_RUN if command == "run" else ()))
        outcome.assert_one_clear_error(2, contains=f"Messages API version {version}")
        assert "--temperature default" in outcome.stderr
    assert not openai_server.requests
    outcome = edsb("run", *model, *ONE_RUN, *QUIET, "--out", "claude")
    assert f"note: no temperature sent: Anthropic's Messages API version {version}" in outcome.stderr
    assert json.loads(Path("claude/config.json").read_text())["temperature"] is None


def test_the_card_and_sample_log_say_what_was_asked_and_why_not_sent(
    edsb: Callable[..., Outcome], openai_server: OpenAIServer
) -> None:
    assert _run(edsb, openai_server, Path("paper")).returncode == 0
    assert (
        _run(edsb, openai_server, Path("mine"), "--temperature", "default", "--reasoning-effort", "low").returncode == 0
    )
    paper = json.loads(Path("paper/results.json").read_text())["run"]["sampling"]
    assert (paper["temperature"], paper["json_mode"], paper["reasoning_effort"]) == (0.1, True, None)
    assert paper["not_sent"] == {"reasoning": DEFAULT_EFFORT}
    assert {(s["module"], s["temperature"], s["json_mode"]) for s in paper["sent"]} >= {("narrator", 0.1, True)}
    mine = json.loads(Path("mine/results.json").read_text())["run"]["sampling"]
    assert (mine["temperature"], mine["reasoning_effort"]) == (None, "low")
    assert set(mine["not_sent"]) == {"temperature"} and "--temperature default" in mine["not_sent"]["temperature"]
    assert {(s["temperature"], s["reasoning_effort"]) for s in mine["sent"]} == {(None, "low")}
    outcome = edsb("report", "mine", "--format", "samples")
    (line,) = outcome.stdout.splitlines()
    exchange = json.loads(line)["exchanges"][0]
    assert exchange["settings"]["temperature"] is None and exchange["settings"]["reasoning_effort"] == "low"
    assert {"sent", "reasoning", "refusal", "reasoning_tokens"} <= set(exchange)
    compared = edsb("compare", "paper", "mine")
    assert compared.returncode == 0, compared.stderr
    assert (
        "warning: the runs were asked for with different generation settings (temperature: paper 0.1, mine not "
        "sent; reasoning_effort: paper not sent, mine low)" in compared.stderr
    )
    assert _run(edsb, openai_server, Path("same")).returncode == 0
    assert "generation settings" not in edsb("compare", "paper", "same").stderr


def test_a_config_file_takes_the_same_settings(edsb: Callable[..., Outcome], openai_server: OpenAIServer) -> None:
    Path("run.toml").write_text('[run]\ntemperature = "default"\nno-json-mode = true\nreasoning-effort = "high"\n')
    assert _run(edsb, openai_server, Path("out"), "--config", "run.toml").returncode == 0
    config = json.loads(Path("out/config.json").read_text())
    assert (config["temperature"], config["json_mode"], config["reasoning_effort"]) == (None, False, "high")
    bodies = [request.json() for request in openai_server.chat_requests]
    assert bodies and all("temperature" not in b and "response_format" not in b for b in bodies)
    # the directory's own config.json works as a config file: the same run, resumed
    assert _run(edsb, openai_server, Path("out"), "--config", "out/config.json").returncode == 0


def test_a_replay_asks_with_the_recorded_settings(edsb: Callable[..., Outcome], openai_server: OpenAIServer) -> None:
    assert _run(edsb, openai_server, Path("first"), *OPTIONS, "--reasoning-effort", "low").returncode == 0
    sent = len(openai_server.chat_requests)
    outcome = edsb("run", "--model", "replay:first", *ONE_RUN, *QUIET, "--out", "again")
    assert outcome.returncode == 0, outcome.stderr
    assert len(openai_server.chat_requests) == sent  # every answer came from the recording
    first, again = (json.loads(Path(d, "config.json").read_text()) for d in ("first", "again"))
    fields = ("temperature", "model_seed", "max_tokens", "json_mode", "reasoning_effort")
    assert [again[name] for name in fields] == [first[name] for name in fields]


def test_the_reasoning_is_kept_in_the_transcripts_sample_log_and_report(
    edsb: Callable[..., Outcome], openai_server: OpenAIServer
) -> None:
    thought = "Ryan is tired after work, so nothing happens yet."
    openai_server.handler = lambda request: Reply.completion(
        f'<think>{thought}</think>{{"reasoning": "", "event": {{}}}}'
    )
    assert _run(edsb, openai_server, Path("out")).returncode == 0
    (record,) = read_transcripts(Path("out"))
    assert record.response is not None and record.response.reasoning == thought
    assert record.response.text == '{"reasoning": "", "event": {}}'  # the answer alone, judged
    (line,) = edsb("report", "out", "--format", "samples").stdout.splitlines()
    assert json.loads(line)["exchanges"][0]["reasoning"] == thought
    assert edsb("report", "out", "--format", "html", "-o", "report.html").returncode == 0
    page = Path("report.html").read_text()
    assert thought in page and '"model reasoning"' in page  # a folded block of its own, above the reply
