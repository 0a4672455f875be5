"""What a provider's API refuses, decided before any request, for either kind of installed Anthropic SDK: one whose
API version has no temperature (today's) and one whose version still has it."""

from __future__ import annotations

import pytest

from edsb.errors import UsageError
from edsb.llm import rules as dialects
from edsb.llm.providers import anthropic
from edsb.planning.generation import GenerationSettings
from edsb.runner.config import resolve_generation

CLAUDE = "anthropic:claude-sonnet-4-5"


@pytest.fixture(params=[False, True], ids=["no temperature", "temperature"])
def takes_temperature(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(anthropic, "temperature_api", lambda: ("2099-01-01", request.param))
    return bool(request.param)


def test_claude_gets_the_papers_temperature_only_where_its_api_has_one(takes_temperature: bool) -> None:
    notes: list[str] = []
    settings = resolve_generation(CLAUDE, {}, notes)
    assert settings.temperature == (0.1 if takes_temperature else None)
    assert notes == ([] if takes_temperature else [
        "no temperature sent: Anthropic's Messages API version 2099-01-01 (the installed anthropic SDK's) has no "
        "temperature"
    ])  # fmt: skip
    reasons = dialects.unsent_reasons(CLAUDE, settings)
    assert ("temperature" in reasons) is not takes_temperature
    assert "no JSON mode" in reasons["json_mode"] and reasons["reasoning"] == dialects.DEFAULT_EFFORT


def test_claude_thinking_sends_no_temperature_and_refuses_another(takes_temperature: bool) -> None:
    assert resolve_generation(CLAUDE, {"thinking_budget": 2048}).temperature is None
    wanted = "requires temperature 1" if takes_temperature else "has no temperature"
    with pytest.raises(UsageError, match=wanted):
        resolve_generation(CLAUDE, {"thinking_budget": 2048, "temperature": 0.5})
    if takes_temperature:  # 1 is what thinking demands: allowed, and sent
        assert resolve_generation(CLAUDE, {"thinking_budget": 2048, "temperature": 1}).temperature == 1


def test_claude_5_thinks_unasked_so_it_gets_no_temperature_either(takes_temperature: bool) -> None:
    """Claude 5 and later think by default, and thinking takes only temperature 1: even an SDK whose API version has
    a temperature sends none, and another is refused before any request."""
    assert resolve_generation("anthropic:claude-sonnet-5", {}).temperature is None
    wanted = "requires temperature 1" if takes_temperature else "has no temperature"
    with pytest.raises(UsageError, match=wanted):
        resolve_generation("anthropic:claude-sonnet-5", {"temperature": 0.1})


def test_the_paper_gets_its_own_settings_and_the_record_says_the_default_effort_applied() -> None:
    settings = resolve_generation("openai:gpt-4o-2024-08-06", {})
    assert settings == GenerationSettings(temperature=0.1, max_tokens=None, model_seed=None, json_mode=True)
    assert dialects.unsent_reasons("openai:gpt-4o-2024-08-06", settings) == {"reasoning": dialects.DEFAULT_EFFORT}
    chosen = resolve_generation("openai:gpt-5", {"temperature": "default", "reasoning_effort": "low"})
    assert dialects.unsent_reasons("openai:gpt-5", chosen).keys() == {"temperature"}
