"""edsb's `ChatModel` over Inspect AI's model API, so the planning pipeline runs unchanged inside `inspect eval`.

Every request goes through Inspect's `Model.generate`: the provider, retries, connection limits, cache and batch
settings of the eval apply, and each call is logged as a model event of the sample.
"""

from __future__ import annotations

import time

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
JSON_MODE_PROVIDERS = frozenset({"openai", "openai-api", "vllm", "sglang", "together", "groq", "fireworks", "mockllm"})
JSON_MODE = {"response_format": {"type": "json_object"}}


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
