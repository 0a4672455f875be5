"""edsb's `ChatModel` over Inspect AI's model API, so the planning pipeline runs unchanged inside `inspect eval`.

Every request goes through Inspect's `Model.generate`: the provider, retries, connection limits, cache and batch
settings of the eval apply, and each call is logged as a model event of the sample.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from inspect_ai.event import ModelEvent
from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
)

from edsb.llm.errors import TransportError
from edsb.llm.protocol import CAP_FIELDS, ChatRequest, ChatResponse, Message
from edsb.llm.providers.openai import reasoning_model

# Providers that speak OpenAI's chat API and so understand `response_format: json_object`, the JSON mode the
# reference asks for on the Narrator. Other providers get the same prompt without it (the prompt asks for JSON too).
JSON_MODE_PROVIDERS = frozenset(
    {"openai", "openai-api", "vllm", "sglang", "together", "groq", "fireworks", "mockllm", "edsb"}
)
JSON_MODE = {"response_format": {"type": "json_object"}}


class RequestAltered(RuntimeError):
    """Inspect's provider sent another request than edsb's: a run planned that way is not the benchmark's run, so
    the sample fails (an Inspect error) instead of being scored."""


ROUTE_HINT = (
    "for an OpenAI-compatible server use openai-api/<service>/<model> (or vllm/..., sglang/...) rather than "
    "openai/<model> --model-base-url, which treats model names it does not know as reasoning models"
)


# Where each API Inspect may route to carries a setting in its raw request (chat completions, the Responses API,
# Anthropic's Messages, Gemini), searched at any depth: a setting asked for and found under none of them was dropped.
CAP_KEYS = frozenset(CAP_FIELDS)
EFFORT_KEYS = frozenset({"reasoning_effort", "effort", "thinking_level", "thinkingLevel"})
BUDGET_KEYS = frozenset({"budget_tokens", "thinking_budget", "thinkingBudget"})
SYSTEM_KEYS = frozenset({"system", "instructions", "system_instruction", "systemInstruction"})


def _entries(value: Any) -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """(key, value, the mapping holding it) of every mapping entry in a JSON-like value, at any depth."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key), item, value
            yield from _entries(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _entries(item)


def _system_problem(
    request: ChatRequest, entries: list[tuple[str, Any, Mapping[str, Any]]], developer: bool
) -> str | None:
    """How the system message was lost, if it was: sent as a message of another role, or not at all. Message texts
    are not compared (Inspect logs long ones as attachments): a message of role system, or a system field
    (Anthropic's `system`, the Responses API's `instructions`, Gemini's system instruction), carries it; so does
    role `developer` where `developer` says the API takes it for the system prompt."""
    wanted = sum(m.role == "system" for m in request.messages)
    roles = [str(item) for key, item, _ in entries if key == "role"]
    carried = roles.count("system") + (roles.count("developer") if developer else 0)
    fields = any(key in SYSTEM_KEYS and item for key, item, _ in entries)
    if wanted == 0 or carried >= wanted or fields:
        return None
    others = sorted({role for role in roles if role not in ("user", "assistant", "system")})
    return f"the system message went out as role {', '.join(others)}" if others else "the system message was left out"


SETTINGS_HINT = (
    "give the task only settings this provider sends (e.g. -T temperature=default for an API without temperature)"
)


def altered(request: ChatRequest, sent: Mapping[str, Any], *, developer: bool = False) -> str | None:
    """What the raw request Inspect's provider sent lost of edsb's `request`: its system message (sent under another
    role, or not at all), its temperature, token cap or reasoning settings; None if everything arrived. Covers
    every API Inspect routes to (chat completions, the Responses API, Anthropic's Messages, Gemini). `developer`:
    the system prompt may go as role `developer` (OpenAI's reasoning models, on OpenAI's own API)."""
    entries = list(_entries(sent))
    problems = [problem] if (problem := _system_problem(request, entries, developer)) else []
    found: dict[str, list[Any]] = {}
    for key, item, _ in entries:
        found.setdefault(key, []).append(item)
    if request.temperature is not None and request.temperature not in found.get("temperature", []):
        got = found.get("temperature")
        problems.append(f"temperature {request.temperature:g} " + (f"became {got[0]}" if got else "was dropped"))
    asked = (
        (request.max_tokens, CAP_KEYS, "the token cap"),
        (request.reasoning_effort or request.thinking_level, EFFORT_KEYS, "the reasoning effort"),
        (request.thinking_budget, BUDGET_KEYS, "the thinking budget"),
    )
    problems += [f"{what} was dropped" for value, keys, what in asked if value is not None and not keys & set(found)]
    return " and ".join(problems) or None


def _sent_request() -> Mapping[str, Any] | None:
    """The raw request of the model call that just finished in this sample (None when Inspect logged none, e.g. a
    cached answer)."""
    for event in reversed(transcript().history.recent_events(16)):
        if isinstance(event, ModelEvent):
            return event.call.request if event.call is not None else None
    return None


def _message(message: Message) -> ChatMessage:
    if message.role == "system":
        return ChatMessageSystem(content=message.content)
    if message.role == "user":
        return ChatMessageUser(content=message.content)
    return ChatMessageAssistant(content=message.content)


def refused(output: ModelOutput) -> bool:
    """Whether the provider refused the request rather than answering it. Inspect turns OpenAI's refusals (prompt
    too long for the context, content policy) into an output without usage whose text is the error message."""
    if output.error:
        return True
    return output.usage is None and output.stop_reason in ("model_length", "content_filter")


class InspectChatModel:
    """A `ChatModel` answering through one Inspect model (one instance per sample).

    A call that raises is reported to the pipeline as a `TransportError` (the run becomes incomplete) and kept in
    `failure`, so the solver can re-raise Inspect's own exception (limits, retries exhausted) for Inspect to handle.
    """

    def __init__(self, model: Model) -> None:
        self._model = model
        self.failure: Exception | None = None

    @property
    def identity(self) -> str:
        return f"inspect:{self._model}"

    @property
    def provider(self) -> str:
        return str(self._model).split("/", 1)[0]

    @property
    def developer_role(self) -> bool:
        """Whether the system prompt may arrive as role `developer`: Inspect's own OpenAI provider sends it so to
        OpenAI's reasoning models (the o-series, gpt-5 and later), as OpenAI documents for them
        (https://platform.openai.com/docs/guides/reasoning). A model name OpenAI does not list keeps the system role:
        a compatible server behind `openai/<model>` may not know `developer`."""
        return self.provider == "openai" and reasoning_model(self._model.name)

    def json_mode(self) -> dict[str, Any] | None:
        """Chat completions' `response_format`, where the provider speaks that API. Not where Inspect's OpenAI
        provider routes the model to the Responses API: that API refuses `response_format`, and Inspect passes on
        none of `extra_body` but its own fields there, so the prompt alone asks for JSON (as for Anthropic)."""
        if self.provider not in JSON_MODE_PROVIDERS or getattr(self._model.api, "responses_api", False):
            return None
        return JSON_MODE

    def config(self, request: ChatRequest) -> GenerateConfig:
        """The request's own settings under Inspect's names (Anthropic's effort is Inspect's `effort`; Gemini 3's
        thinking level its `reasoning_effort`); everything else comes from the eval's generate config."""
        anthropic = self.provider == "anthropic"
        effort = request.reasoning_effort or request.thinking_level
        return GenerateConfig(
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            top_p=request.top_p,
            seed=request.seed,
            reasoning_effort=None if anthropic else effort,  # type: ignore[arg-type]
            effort=effort if anthropic else None,  # type: ignore[arg-type]
            reasoning_tokens=request.thinking_budget,
            extra_body=self.json_mode() if request.json_mode else None,
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        try:
            output = await self._model.generate([_message(m) for m in request.messages], config=self.config(request))
        except Exception as exc:
            self.failure = exc
            raise TransportError("connection", f"{type(exc).__name__}: {exc}", attempts=1) from exc
        if refused(output):  # an execution error, as `edsb run` records a request the endpoint refuses
            raise TransportError("rejected", output.error or output.completion, attempts=1)
        sent = _sent_request()
        problem = altered(request, sent, developer=self.developer_role) if sent is not None else None
        if problem is not None:
            fix = ROUTE_HINT if self.provider == "openai" else SETTINGS_HINT
            self.failure = RequestAltered(f"Inspect's {self._model} provider changed edsb's request: {problem}; {fix}")
            raise TransportError("invalid_response", str(self.failure), attempts=1)
        usage = output.usage
        return ChatResponse(
            text=output.completion,
            prompt_tokens=usage.input_tokens if usage else 0,
            completion_tokens=usage.output_tokens if usage else 0,
            latency_s=time.perf_counter() - started,
            model=output.model or self._model.name,
            finish_reason=output.stop_reason,
        )

    async def aclose(self) -> None:
        """Inspect owns the model's connections."""
