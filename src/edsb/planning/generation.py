"""The one function that turns a run's generation settings into each `ChatRequest`.

`edsb run` (through the pipeline) and `edsb check-model` build their requests here, so a passing check-model has
sent the very settings a sweep sends. The settings themselves, and their defaults (the paper's protocol: temperature
0.1, JSON mode on the Narrator), are declared in `edsb.settings.run`.
"""

from __future__ import annotations

from collections.abc import Iterable

from edsb.llm.protocol import ChatRequest, Message
from edsb.settings.run import GENERATION_FIELDS as GENERATION_FIELDS
from edsb.settings.run import GenerationSettings as GenerationSettings
from edsb.settings.vocab import PROVIDER_DEFAULT as PROVIDER_DEFAULT
from edsb.settings.vocab import ReasoningEffort as ReasoningEffort
from edsb.settings.vocab import ThinkingLevel as ThinkingLevel


def chat_request(
    settings: GenerationSettings, messages: Iterable[Message], *, json_mode: bool, repeat: int = 0
) -> ChatRequest:
    """The request of one stage (`json_mode`: whether that stage asks for JSON) in repeat `repeat`."""
    return ChatRequest(
        messages=tuple(messages),
        temperature=settings.temperature,
        json_mode=json_mode and settings.json_mode,
        sample_index=repeat,
        max_tokens=settings.max_tokens,
        seed=None if settings.model_seed is None else settings.model_seed + repeat,
        reasoning_effort=None if settings.reasoning_effort is None else str(settings.reasoning_effort),
        thinking_budget=settings.thinking_budget,
        thinking_level=None if settings.thinking_level is None else str(settings.thinking_level),
    )


# What a request asks of the model, as transcripts record it and the run card and sample log show it.
REQUEST_SETTINGS = tuple(name for name in ChatRequest.model_fields if name not in ("messages", "sample_index"))
