"""The generation settings of a run and the one function that turns them into each `ChatRequest`.

`edsb run` (through the pipeline) and `edsb check-model` build their requests here, so a passing check-model has
sent the very settings a sweep sends. The defaults are the paper's protocol (temperature 0.1, JSON mode on the
Narrator); `RunConfig` takes its generation defaults from this model, so each is written once.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from edsb.llm.protocol import ChatRequest, Message

# The spelling of "send no temperature" on the command line and in a config file (TOML has no null).
PROVIDER_DEFAULT = "default"
PAPER_TEMPERATURE = 0.1


class ReasoningEffort(StrEnum):
    """OpenAI's `reasoning_effort` and Anthropic's effort, as their APIs name the levels."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"


class ThinkingLevel(StrEnum):
    """Gemini 3's `thinkingLevel`."""

    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class GenerationSettings(BaseModel):
    """What a run asks of the model with every request. None: not sent, the provider's default applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = Field(default=PAPER_TEMPERATURE, ge=0.0, le=2.0)
    # The reply's token cap (the answer's room; a thinking budget comes on top) and the sampling seed, base of the
    # repeats' (repeat r sends model_seed + r). `resolve_run_config` fills in the model's own defaults.
    max_tokens: int | None = Field(default=None, ge=1)
    model_seed: int | None = Field(default=None, ge=0)
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget: int | None = Field(default=None, ge=0)
    thinking_level: ThinkingLevel | None = None
    json_mode: bool = True  # JSON mode on the stages that ask for it (the Narrator), as the reference does

    @field_validator("temperature", mode="before")
    @classmethod
    def _provider_default(cls, value: object) -> object:
        """`--temperature default` (and `temperature = "default"` in a file): send none."""
        return None if isinstance(value, str) and value.strip().lower() == PROVIDER_DEFAULT else value

    @property
    def reasoning_sent(self) -> bool:
        return any(v is not None for v in (self.reasoning_effort, self.thinking_budget, self.thinking_level))

    def request(self, messages: Iterable[Message], *, json_mode: bool, repeat: int = 0) -> ChatRequest:
        """The request of one stage (`json_mode`: whether that stage asks for JSON) in repeat `repeat`."""
        return ChatRequest(
            messages=tuple(messages),
            temperature=self.temperature,
            json_mode=json_mode and self.json_mode,
            sample_index=repeat,
            max_tokens=self.max_tokens,
            seed=None if self.model_seed is None else self.model_seed + repeat,
            reasoning_effort=None if self.reasoning_effort is None else str(self.reasoning_effort),
            thinking_budget=self.thinking_budget,
            thinking_level=None if self.thinking_level is None else str(self.thinking_level),
        )


GENERATION_FIELDS = tuple(GenerationSettings.model_fields)
# What a request asks of the model, as transcripts record it and the run card and sample log show it.
REQUEST_SETTINGS = tuple(name for name in ChatRequest.model_fields if name not in ("messages", "sample_index"))
