"""The one interface between edsb and a language model, and the request hash shared by the cache and replay."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import to_json

from edsb.text import clean_text, has_surrogates

ResponseSource = Literal["model", "cache", "replay"]

# Bumped whenever the hashed request layout changes, so old cache rows can never answer new requests.
KEY_VERSION = 3


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(_Frozen):
    role: Literal["system", "user", "assistant"]
    content: str

    @field_validator("content")
    @classmethod
    def _valid_unicode(cls, content: str) -> str:
        """A message quotes earlier replies (the Narrator's event in the Event Parser's query): always valid Unicode,
        so hashing, sending and recording it cannot fail."""
        return clean_text(content)


class ChatRequest(_Frozen):
    """One chat completion as edsb asks for it.

    `sample_index` is the caller's repeat number: it takes part in the request hash so that repeated samples at a
    non-zero temperature are cached and replayed as independent answers. Settings left at None are not sent.
    """

    messages: tuple[Message, ...] = Field(min_length=1)
    temperature: float | None = Field(ge=0.0)  # None: not sent, the provider's default applies
    json_mode: bool = False
    sample_index: int = Field(default=0, ge=0)
    max_tokens: int | None = Field(default=None, gt=0)  # the answer's room; a thinking budget comes on top
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    reasoning_effort: str | None = None  # OpenAI's reasoning_effort, Anthropic's effort (None: not sent)
    thinking_budget: int | None = Field(default=None, ge=0)  # Anthropic's and Gemini's thinking tokens
    thinking_level: str | None = None  # Gemini 3's thinkingLevel


# Request settings added after KEY_VERSION 3: left out of the hash while unset, so that earlier keys still match.
_LATER_SETTINGS = ("reasoning_effort", "thinking_budget", "thinking_level")


class ChatResponse(_Frozen):
    """A completion the model returned, however bad its text; transport failures are raised instead."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str  # the identity the server reported (OpenAI's `model` field), else the requested name
    finish_reason: str | None
    attempts: int = 1
    source: ResponseSource = "model"
    surrogates_replaced: bool = False  # the server sent lone surrogates (made U+FFFD here, where text enters edsb)
    # The model's reasoning, split off the answer (think tags, reasoning fields, thinking blocks, thought parts);
    # `text` is then the answer only. `reasoning_tokens` is inside `completion_tokens`, as the APIs bill it.
    reasoning: str = ""
    reasoning_source: str | None = None  # where the reasoning was split off (e.g. `think_tags`); None: it had none
    reasoning_tokens: int | None = None
    # Input tokens billed at their own rate, inside `prompt_tokens`: read from the provider's prompt cache, and written
    # to it (Anthropic); None where the reply does not say.
    # Left out of the cache's and the transcripts' records while unset, so those read and hash as before.
    cached_tokens: int | None = Field(default=None, exclude_if=lambda value: value is None)
    cache_write_tokens: int | None = Field(default=None, exclude_if=lambda value: value is None)
    # What the provider says it billed for this request (OpenRouter's usage.cost).
    billed_usd: float | None = Field(default=None, exclude_if=lambda value: value is None)
    refusal: str | None = None  # the provider's refusal text (OpenAI's message.refusal, a stop for safety)
    # The generation settings as they went over the wire, under the API's own names (e.g. max_completion_tokens);
    # a setting absent here was not sent.
    sent: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """Every string the server sent becomes valid Unicode once, here, whichever client built the response: a
        lone surrogate (JSON can spell one) would fail every writer downstream."""
        if isinstance(data, dict):
            dirty = [name for name in _SERVER_TEXT if isinstance(data.get(name), str) and has_surrogates(data[name])]
            if dirty:
                data = {**data, **{name: clean_text(data[name]) for name in dirty}, "surrogates_replaced": True}
        return data

    def cap_note(self) -> str | None:
        """How much of the token cap thinking used, for a reply cut at the cap (None: the reply reports no
        reasoning tokens): a cut answer must not read as the model's own short one."""
        if not self.reasoning_tokens:
            return None
        cap = next((self.sent[name] for name in CAP_FIELDS if isinstance(self.sent.get(name), int)), None)
        of = f" of the {cap:,}-token cap" if cap else ""
        return f"thinking used {self.reasoning_tokens:,} tokens{of}"


_SERVER_TEXT = ("text", "model", "finish_reason", "reasoning", "refusal")
# Where each API takes the output cap: OpenAI's reasoning models, the other chat APIs and Anthropic, OpenAI's
# Responses API, Gemini. The one list of these names: the refusals and the Inspect guard read it too.
CAP_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens", "maxOutputTokens")


@runtime_checkable
class ChatModel(Protocol):
    """An async chat model. `identity` names the model and where it runs; it is part of every request hash."""

    @property
    def identity(self) -> str: ...

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


@lru_cache(maxsize=256)
def text_id(text: str) -> str:
    """The content address of a message text, shared by request keys and transcripts.

    Memoised: a request repeats the same system prompt and few-shot turns (the same string objects, whose hash
    Python keeps), so only the run's own query is hashed; the bound keeps unique queries from piling up."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_key(identity: str, request: ChatRequest) -> str:
    """A stable hash of everything that can change an answer: model identity, messages, settings, sample index."""
    # Messages enter by content address, so a key hashes a few hundred bytes instead of the whole prompt; pydantic's
    # serialiser writes dict entries in order, so the bytes are canonical for a given request.
    canonical = to_json(
        {
            "v": KEY_VERSION,
            "model": identity,
            "messages": [(message.role, text_id(message.content)) for message in request.messages],
            "settings": _hashed_settings(request),
        }
    )
    return hashlib.sha256(canonical).hexdigest()


def _hashed_settings(request: ChatRequest) -> dict[str, Any]:
    settings = request.model_dump(exclude={"messages"})
    for name in _LATER_SETTINGS:
        if settings[name] is None:
            del settings[name]
    return settings
