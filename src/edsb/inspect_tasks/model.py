"""edsb's `ChatModel` over Inspect AI's model API, so the planning pipeline runs unchanged inside `inspect eval`.

Every request goes through Inspect's `Model.generate`: the provider, retries, connection limits, cache and batch
settings of the eval apply, and each call is logged as a model event of the sample.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
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
from edsb.llm.protocol import ChatRequest, ChatResponse, Message

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


def altered(request: ChatRequest, sent: Mapping[str, Any]) -> str | None:
    """What the raw chat-completions request Inspect sent lost of edsb's `request`: its system message (sent under
    another role, or not at all) or its temperature; None if both arrived, or if `sent` is not that kind of body."""
    messages = sent.get("messages")
    if not isinstance(messages, list):
        return None
    problems = []
    roles = [m.get("role") for m in messages if isinstance(m, Mapping)]
    wanted = sum(m.role == "system" for m in request.messages)
    if roles.count("system") < wanted:
        others = sorted({str(role) for role in roles if role not in ("user", "assistant", "system")})
        how = f"went out as role {', '.join(others)}" if others else "was left out"
        problems.append(f"the system message {how}")
    if request.temperature is not None and sent.get("temperature") != request.temperature:
        got = sent.get("temperature")
        problems.append(f"temperature {request.temperature:g} " + ("was dropped" if got is None else f"became {got}"))
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

    def config(self, request: ChatRequest) -> GenerateConfig:
        """The request's own settings; everything else comes from the eval's generate config."""
        return GenerateConfig(
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            top_p=request.top_p,
            seed=request.seed,
            extra_body=JSON_MODE if request.json_mode and self.provider in JSON_MODE_PROVIDERS else None,
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
        sent = _sent_request() if self.provider in JSON_MODE_PROVIDERS else None
        problem = altered(request, sent) if sent is not None else None
        if problem is not None:
            self.failure = RequestAltered(
                f"Inspect's {self._model} provider changed edsb's request: {problem}; {ROUTE_HINT}"
            )
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
