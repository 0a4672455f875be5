"""`openai-responses:<model>`: OpenAI's Responses API through the official `openai` SDK (extra `openai`), the only
route to the models OpenAI serves there alone (o1-pro, o3-pro, gpt-5-pro, the codex models), and a choice, recorded
in the model's identity, for the others.

What is sent: the messages as they are, as `input` (the system prompt keeps its role, so prompts stay the paper's
byte for byte); the temperature and top_p when given; JSON mode as `text.format` `json_object`; the token cap as
`max_output_tokens` when given; `reasoning` with the effort when given and a summary asked for, so the model's
reasoning is kept as reasoning; `store: false`. No seed: the API has none. The reply's reasoning items are the
reasoning, its output text the answer; `output_tokens` include the reasoning tokens, as billed, and the cached input
tokens are recorded apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse
from edsb.llm.providers.base import Provider
from edsb.llm.providers.openai import OPENAI_URL
from edsb.llm.reasoning import Split, split_think
from edsb.llm.remote import token_count
from edsb.llm.retry import AttemptFailure

# How the API says why a reply stopped short (`incomplete_details.reason`), as chat completions' finish reasons.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


@dataclass(frozen=True)
class OpenAIResponses(Provider):
    def client(self, model: str, options: dict[str, Any], *, prompt_cache: bool) -> ChatModel:
        from edsb.llm.responses_client import OpenAIResponsesModel  # the SDK's types load with the model

        return OpenAIResponsesModel(model, **options)

    def no_seed(self) -> str:
        return "OpenAI's Responses API has none"

    def priced_as(self, model: str) -> tuple[str, str]:
        """OpenAI bills a model alike through either API."""
        return "openai", model


def responses_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The keyword arguments of `responses.create`; a setting left unset is not sent."""
    params: dict[str, Any] = {
        "model": model,
        "input": [{"role": message.role, "content": message.content} for message in request.messages],
        "store": False,
    }
    for name, value in (("temperature", request.temperature), ("top_p", request.top_p)):
        if value is not None:
            params[name] = value
    if request.json_mode:
        params["text"] = {"format": {"type": "json_object"}}
    if request.max_tokens is not None:
        params["max_output_tokens"] = request.max_tokens
    reasoning: dict[str, Any] = {"summary": "auto"}  # the reasoning kept as reasoning, not lost
    if request.reasoning_effort is not None:
        reasoning["effort"] = request.reasoning_effort
    params["reasoning"] = reasoning
    return params


def read_response(result: Any, model: str, latency_s: float, attempts: int, sent: dict[str, Any]) -> ChatResponse:
    """A `ChatResponse` from the SDK's response: the answer, the reasoning summaries, the usage as billed."""
    output = getattr(result, "output", None)
    usage = getattr(result, "usage", None)
    if not isinstance(output, list) or usage is None:
        raise AttemptFailure("invalid_response", "the reply is not a response (no output or usage)")
    split, refusal = _split_output(output)
    details = getattr(usage, "output_tokens_details", None)
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(details, "reasoning_tokens", None)
    incomplete = getattr(getattr(result, "incomplete_details", None), "reason", None)
    status = getattr(result, "status", None)
    reported = getattr(result, "model", None)
    return ChatResponse(
        **split.fields(),
        prompt_tokens=token_count(getattr(usage, "input_tokens", None), "usage.input_tokens"),
        completion_tokens=token_count(getattr(usage, "output_tokens", None), "usage.output_tokens"),
        reasoning_tokens=None if reasoning is None else token_count(reasoning, "usage.output_tokens_details"),
        cached_tokens=None if cached is None else token_count(cached, "usage.input_tokens_details"),
        latency_s=latency_s,
        model=reported if isinstance(reported, str) and reported else model,
        finish_reason=_INCOMPLETE.get(str(incomplete), str(incomplete)) if incomplete else _stop(status),
        attempts=attempts,
        refusal=refusal,
        sent=sent,
    )


def _stop(status: Any) -> str | None:
    return "stop" if status == "completed" else status if isinstance(status, str) else None


def _split_output(output: list[Any]) -> tuple[Split, str | None]:
    """The answer from the message items' output text, the reasoning from the reasoning items' summaries, and a
    refusal where the model gave one; other items are noted and left out."""
    texts: list[str] = []
    summaries: list[str] = []
    refusal: str | None = None
    unread: list[str] = []
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "reasoning":
            summaries += [part.text for part in getattr(item, "summary", None) or [] if isinstance(part.text, str)]
        elif kind == "message":
            for part in getattr(item, "content", None) or []:
                if getattr(part, "type", None) == "output_text" and isinstance(part.text, str):
                    texts.append(part.text)
                elif getattr(part, "type", None) == "refusal":
                    refusal = getattr(part, "refusal", None) or "the model refused"
        else:
            unread.append(f"unreadable: an output item of type {kind!r}")
    split = split_think("".join(texts))
    for summary in summaries:
        split.add(summary, "reasoning_summary")
    for note in unread:
        split.add("", note)
    return split, refusal


ROW = OpenAIResponses(
    "openai-responses", "responses", "OPENAI_API_KEY", OPENAI_URL, takes_seed=False, extra="openai", batch="openai"
)
