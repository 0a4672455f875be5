"""What each provider's API is known to refuse or leave out of edsb's generation settings, before any request.

A setting a provider refuses for every request is configuration, not the model's failure: where it is knowable
from the model and the settings alone it is a one-line error here (the client's refusal handling covers the rest,
at the first request). Where the paper's default cannot be sent, the reason is written once here, for the note at
the start of a run and for the run card. What is particular to a provider is its own (`Provider.refuses`,
`temperature_not_sent`, `json_mode_not_sent`); this module asks it, after the checks every provider shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edsb.llm.providers import GenerationSettings, Provider, get_provider
from edsb.llm.providers.anthropic import temperature_api as anthropic_api
from edsb.llm.spec import parse_model_spec

__all__ = [
    "DEFAULT_EFFORT",
    "GenerationSettings",
    "anthropic_api",
    "provider_refuses",
    "temperature_not_sent",
    "unsent_reasons",
]

DEFAULT_EFFORT = "not sent: the provider's default effort applies"


def _provider(model: str) -> tuple[Provider, str] | None:
    """The provider a `--model` names and its model's name; None for a model that is not a provider's."""
    spec = parse_model_spec(model)
    return (get_provider(spec.kind), spec.target or "") if spec.remote else None


def temperature_not_sent(model: str, settings: Mapping[str, Any]) -> str | None:
    """Why `model` gets no temperature when none is given (None: it gets the paper's)."""
    found = _provider(model)
    return None if found is None else found[0].temperature_not_sent(found[1], settings)


def provider_refuses(model: str, settings: GenerationSettings) -> str | None:
    """The one-line reason `model`'s API refuses these settings for every request, with the fix; None if none."""
    found = _provider(model)
    if found is None:  # a replay asks as its recording did; the embedded model and the oracle have no reasoning
        if settings.reasoning_sent and parse_model_spec(model).kind != "replay":
            return "reasoning settings apply to a provider's models (PROVIDER:<model>), not to this one"
        return None
    if settings.thinking_budget is not None and settings.thinking_level is not None:
        return "pass --thinking-budget or --thinking-level, not both (Gemini takes one of them)"
    provider, target = found
    return provider.refuses(target, settings)


def unsent_reasons(model: str, settings: GenerationSettings) -> dict[str, str]:
    """Why each setting the paper's protocol has, or a reasoning control, is not sent to `model`: for the run card."""
    reasons: dict[str, str] = {}
    found = _provider(model)
    if settings.temperature is None:
        why = temperature_not_sent(model, settings.model_dump())
        reasons["temperature"] = why or "--temperature default: the provider's default temperature applies"
    if not settings.json_mode:
        reasons["json_mode"] = "--no-json-mode: JSON is asked for in the prompt only"
    elif found is not None and (unsent := found[0].json_mode_not_sent()):
        reasons["json_mode"] = unsent
    if not settings.reasoning_sent:
        reasons["reasoning"] = DEFAULT_EFFORT
    return reasons
