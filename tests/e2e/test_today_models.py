"""Today's model families through `edsb run` and `edsb check-model`, against loopback fakes that refuse what each
provider's API refuses: the README's command works, what went over the wire is recorded, a passing check-model sent
exactly what the sweep sends, and a refused setting stops both with its fix and scores nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.edsb_cli import Outcome, edsb_in_process, isolate_environment
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.provider_fakes import azure_classic, no_json_mode, openrouter_rules, provider_rules

ONE_RUN = ("--cases", "13", "--distraction", "0", "--no-cache", "--max-retries", "0", "--quiet", "--concurrency", "1")
JSON_MODE = {"response_format": {"type": "json_object"}}

# family: (--model, options, what the Narrator's request must have sent, over the wire)
WORKS: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "the paper's engine": ("openai:gpt-4o-2024-08-06", (), {"temperature": 0.1, **JSON_MODE}),
    "gpt-5, no temperature": ("openai:gpt-5", ("--temperature", "default"), JSON_MODE),
    "gpt-5, effort and cap": (
        "openai:gpt-5",
        ("--temperature", "default", "--reasoning-effort", "low", "--max-tokens", "4000"),
        {**JSON_MODE, "max_completion_tokens": 4000, "reasoning_effort": "low"},
    ),
    "claude": ("anthropic:claude-sonnet-4-5", (), {"max_tokens": 2048, "cache_control": "ephemeral"}),
    "claude, no prompt cache": ("anthropic:claude-sonnet-4-5", ("--no-prompt-cache",), {"cache_control": None}),
    "claude, thinking": (
        "anthropic:claude-sonnet-4-5",
        ("--thinking-budget", "2048"),
        {"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}},
    ),
    "claude 4.7, adaptive thinking": (
        "anthropic:claude-opus-4-7",
        ("--reasoning-effort", "high"),
        {
            "max_tokens": 2048 + 16_384,
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "high"},
        },
    ),
    "claude 5.5, thinking unasked": (
        "anthropic:claude-opus-5-5",
        (),
        {"max_tokens": 2048 + 16_384, "thinking": {"type": "adaptive", "display": "summarized"}, "output_config": None},
    ),
    "o3-pro, responses api": (
        "openai-responses:o3-pro",
        ("--temperature", "default", "--reasoning-effort", "high"),
        {"text": {"format": {"type": "json_object"}}, "reasoning": {"summary": "auto", "effort": "high"}},
    ),
    "gemini 2.5": ("google:gemini-2.5-pro", (), {"temperature": 0.1, "responseMimeType": "application/json"}),
    "gemini 2.5, thinking budget": (
        "google:gemini-2.5-flash",
        ("--thinking-budget", "1024"),
        {"maxOutputTokens": 2048 + 1024, "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}},
    ),
    "gemini 3, thinking level": (
        "google:gemini-3-pro-preview",
        ("--thinking-level", "low"),
        {"thinkingConfig": {"includeThoughts": True, "thinkingLevel": "LOW"}},
    ),
}


@pytest.fixture
def edsb_with_stand_in_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Callable[..., Outcome]]:
    isolate_environment(monkeypatch, tmp_path / "cache")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(name, "not-a-secret")
    monkeypatch.chdir(tmp_path)
    yield lambda *args: edsb_in_process(args, capsys)


def _base(model: str, server: OpenAIServer) -> tuple[str, ...]:
    sdk = model.startswith(("anthropic:", "google:"))
    return ("--model", model, "--base-url", server.root_url if sdk else server.base_url)


def _narrator_wire(out: Path) -> list[dict[str, Any]]:
    sent = json.loads((out / "results.json").read_text())["run"]["sampling"]["sent"]
    return [entry["wire"] for entry in sent if entry["module"] == "narrator"]


@pytest.mark.parametrize(("model", "options", "wire"), WORKS.values(), ids=WORKS.keys())
def test_each_family_runs_with_its_command_and_check_model_sends_the_same(
    edsb_with_stand_in_keys: Callable[..., Outcome], model: str, options: tuple[str, ...], wire: dict[str, Any]
) -> None:
    with OpenAIServer(validator=provider_rules) as server:
        check = edsb_with_stand_in_keys("check-model", *_base(model, server), *options)
        assert check.returncode == 0, check.stderr
        run = edsb_with_stand_in_keys("run", *_base(model, server), *options, *ONE_RUN, "--out", "out")
    assert run.returncode == 0, run.stderr
    (narrator,) = _narrator_wire(Path("out"))
    assert json.loads(check.stdout)["sent"] == narrator  # the very settings the sweep sent
    assert {name: narrator.get(name) for name in wire} == wire
    if model.startswith("anthropic:"):  # the SDK's API version has no temperature: none sent, and the card says why
        assert "temperature" not in narrator and "note: no temperature sent" in run.stderr
        card = json.loads(Path("out/results.json").read_text())["run"]["sampling"]
        assert card["temperature"] is None and "has no temperature" in card["not_sent"]["temperature"]
        assert card["prompt_cache"] is ("--no-prompt-cache" not in options)


STOPS: dict[str, tuple[str, tuple[str, ...], Any, str]] = {
    "gpt-5 at the paper's temperature": ("openai:gpt-5", (), provider_rules, "--temperature default"),
    "gpt-5 with an effort it lacks": (
        "openai:gpt-5",
        ("--temperature", "default", "--reasoning-effort", "none"),
        provider_rules,
        "--reasoning-effort",
    ),
    "a server without JSON mode (400)": ("openai:qwen3", (), no_json_mode(400), "--no-json-mode"),
    "a server without JSON mode (405)": ("openai:qwen3", (), no_json_mode(405), "--no-json-mode"),
    "openrouter, a setting no provider takes": (
        "openrouter:openai/gpt-5",
        (),
        openrouter_rules,
        "--temperature default",
    ),
}


@pytest.mark.parametrize(("model", "options", "validator", "fix"), STOPS.values(), ids=STOPS.keys())
def test_a_refused_setting_stops_check_model_and_run_with_its_fix(
    edsb_with_stand_in_keys: Callable[..., Outcome], model: str, options: tuple[str, ...], validator: Any, fix: str
) -> None:
    with OpenAIServer(validator=validator) as server:
        check = edsb_with_stand_in_keys("check-model", *_base(model, server), *options)
        run = edsb_with_stand_in_keys("run", *_base(model, server), *options, *ONE_RUN, "--out", "out")
        sent = len(server.requests)
    check.assert_one_clear_error(1, contains=fix)
    run.assert_one_clear_error(1, contains="the model endpoint refused a setting")
    assert "fix: " in run.stderr and fix in run.stderr
    assert sent == 2  # one each: the first refusal stopped the sweep
    results = Path("out/results.jsonl")
    assert not results.exists() or results.read_text() == ""  # nothing scored as the model's failure


def test_openrouter_asks_every_setting_to_be_honoured_and_sends_effort_its_way(
    edsb_with_stand_in_keys: Callable[..., Outcome],
) -> None:
    """OpenRouter drops a setting no provider of the model lists, unless asked not to: edsb always asks
    (`provider.require_parameters`), so what the record says was sent is what the model got."""
    model, options = "openrouter:openai/gpt-5", ("--temperature", "default", "--reasoning-effort", "low")
    with OpenAIServer(validator=openrouter_rules) as server:
        run = edsb_with_stand_in_keys("run", *_base(model, server), *options, *ONE_RUN, "--out", "out")
    assert run.returncode == 0, run.stderr
    (narrator,) = _narrator_wire(Path("out"))
    assert narrator["provider"] == {"require_parameters": True}
    assert narrator["reasoning"] == {"effort": "low"} and "reasoning_effort" not in narrator


def test_deepseek_thinking_mode_gets_no_temperature_and_says_why(
    edsb_with_stand_in_keys: Callable[..., Outcome],
) -> None:
    """DeepSeek's thinking mode ignores the temperature without an error: none is sent, the run says so when it
    starts, and config.json and the card do not present the paper's 0.1 as sent."""
    model = "deepseek:deepseek-reasoner"
    with OpenAIServer(validator=provider_rules) as server:
        run = edsb_with_stand_in_keys("run", *_base(model, server), *ONE_RUN, "--out", "out")
        before = len(server.requests)
        refused = edsb_with_stand_in_keys(
            "run", *_base(model, server), "--temperature", "0.1", *ONE_RUN, "--out", "again"
        )
        sent = len(server.requests) - before
    assert run.returncode == 0, run.stderr
    assert "no temperature sent: deepseek's thinking mode ignores the temperature" in run.stderr
    (narrator,) = _narrator_wire(Path("out"))
    assert "temperature" not in narrator
    card = json.loads(Path("out/results.json").read_text())["run"]["sampling"]
    assert card["temperature"] is None and "ignores the temperature" in card["not_sent"]["temperature"]
    refused.assert_one_clear_error(2, contains="--temperature default")
    assert sent == 0  # refused before any request


def test_a_reply_cut_by_ollamas_window_is_not_blamed_on_max_tokens(
    edsb_with_stand_in_keys: Callable[..., Outcome],
) -> None:
    """Ollama's default window is small; a reply it cuts stops at `length` though no cap was sent: the record says
    the window cut it (and names OLLAMA_CONTEXT_LENGTH), not --max-tokens."""
    with OpenAIServer(lambda request: Reply.completion('{"reasoning": "first', finish_reason="length")) as server:
        run = edsb_with_stand_in_keys(
            "run", "--model", "ollama:qwen3", "--base-url", server.base_url, *ONE_RUN, "--out", "out"
        )
        body = server.chat_requests[0].json()
    assert run.returncode == 0, run.stderr
    assert "max_tokens" not in body and "max_completion_tokens" not in body
    (record,) = [json.loads(line) for line in Path("out/results.jsonl").read_text().splitlines()]
    assert "context window cut it" in record["error"] and "OLLAMA_CONTEXT_LENGTH" in record["error"]
    assert "--max-tokens" not in record["error"]


REFUSED_THINKING: dict[str, tuple[str, tuple[str, ...], str]] = {
    "a budget on opus 4.7": ("anthropic:claude-opus-4-7", ("--thinking-budget", "2048"), "--reasoning-effort"),
    "a budget on sonnet 5": ("anthropic:claude-sonnet-5", ("--thinking-budget", "2048"), "--reasoning-effort"),
    "thinking off on fable 5.1": ("anthropic:claude-fable-5-1", ("--thinking-budget", "0"), "--thinking-budget 0"),
    "thinking off on opus 5 at effort max": (
        "anthropic:claude-opus-5",
        ("--thinking-budget", "0", "--reasoning-effort", "max"),
        "--reasoning-effort",
    ),
}


@pytest.mark.parametrize(("model", "options", "fix"), REFUSED_THINKING.values(), ids=REFUSED_THINKING.keys())
def test_thinking_a_model_refuses_names_the_option_that_works(
    edsb_with_stand_in_keys: Callable[..., Outcome], model: str, options: tuple[str, ...], fix: str
) -> None:
    """Claude 4.7 and later take adaptive thinking only, and some always think: what they refuse is a one-line error
    before any request, naming the option to change; the fake refuses what the API refuses, should it reach it."""
    with OpenAIServer(validator=provider_rules) as server:
        check = edsb_with_stand_in_keys("check-model", *_base(model, server), *options)
        run = edsb_with_stand_in_keys("run", *_base(model, server), *options, *ONE_RUN, "--out", "out")
        sent = len(server.requests)
    for outcome in (check, run):
        outcome.assert_one_clear_error(2, contains=fix)
        assert "thinking" in outcome.stderr
    assert sent == 0


def test_a_responses_only_model_on_chat_completions_names_the_route_that_serves_it(
    edsb_with_stand_in_keys: Callable[..., Outcome],
) -> None:
    with OpenAIServer(validator=provider_rules) as server:
        check = edsb_with_stand_in_keys("check-model", *_base("openai:o3-pro", server), "--temperature", "default")
        sent = len(server.requests)
    check.assert_one_clear_error(2, contains="--model openai-responses:o3-pro")
    assert sent == 0


def test_an_azure_classic_deployment_gets_the_cap_its_model_takes(
    edsb_with_stand_in_keys: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gpt-5-mini deployment named `eval-mini`: the api-version query, the key in `api-key`, and the cap as
    `max_completion_tokens`, which the deployment's model takes, though its name is no model's."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "not-a-secret")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "http://127.0.0.1:9")  # --base-url wins
    options = ("--temperature", "default", "--max-tokens", "4000")
    with OpenAIServer(validator=azure_classic) as server:
        model = ("--model", "azure:eval-mini", "--base-url", server.root_url)
        run = edsb_with_stand_in_keys("run", *model, *options, *ONE_RUN, "--out", "out")
        first = server.requests[0]
    assert run.returncode == 0, run.stderr
    assert (first.path, first.query) == ("/openai/deployments/eval-mini/chat/completions", "api-version=2024-10-21")
    assert first.headers["api-key"] == "not-a-secret" and "authorization" not in first.headers
    (narrator,) = _narrator_wire(Path("out"))
    assert narrator["max_completion_tokens"] == 4000 and "max_tokens" not in narrator
    assert narrator["api-version"] == "2024-10-21"


def test_azure_without_an_endpoint_says_which_variable(
    edsb_with_stand_in_keys: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "not-a-secret")
    edsb_with_stand_in_keys("check-model", "--model", "azure:eval-mini").assert_one_clear_error(
        contains="AZURE_OPENAI_ENDPOINT"
    )
