"""`google:<model>`: Gemini through google-genai (extra `google`), and the same requests on Vertex AI
(`google-vertex:`) under Google Cloud's credentials (`llm.cloud`).

What is sent: a chat whose history is every turn but the last, which is then sent; `system_instruction`,
`max_output_tokens` (the answer's 2,048 unless `--max-tokens`, plus room for a thinking model's thinking), the
temperature when given, `response_mime_type` `application/json` when the Narrator asks for JSON, a thinking budget or
level when given; `seed` only with `--model-seed`. Thought parts are the reasoning, and their tokens are output.
Gemini takes `--thinking-budget` or `--thinking-level`, never `--reasoning-effort`: refused before any request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from edsb.llm.errors import TransportError
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse
from edsb.llm.providers.anthropic import SDK_MAX_TOKENS, split_system
from edsb.llm.providers.base import GenerationSettings, Provider
from edsb.llm.reasoning import Split, split_think
from edsb.llm.refusals import ServerError, refusal_fix
from edsb.llm.remote import carried, one_line, token_count
from edsb.llm.retry import AttemptFailure

# Gemini models that think by default, within the output cap; the room their thinking gets on top of the answer's
# unless a budget is given: the largest thinking budget Gemini 2.5 Pro takes, so thinking never cuts an answer short.
THINKING_GEMINI = ("gemini-2.5", "gemini-3")
THINKING_ROOM = 32_768
# Gemini's finish reasons that stop a candidate for safety or policy: the model's refusal.
SAFETY_STOPS = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "RECITATION"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")


@dataclass(frozen=True)
class Google(Provider):
    """Gemini, directly or on Vertex AI: the same requests, the same rules."""

    def client(self, model: str, options: dict[str, Any], *, prompt_cache: bool) -> ChatModel:
        from edsb.llm.sdk_client import GoogleChatModel

        return GoogleChatModel(model, self, **options)

    def refuses(self, model: str, settings: GenerationSettings) -> str | None:
        if settings.reasoning_effort is not None:
            return "Gemini takes --thinking-budget (2.5) or --thinking-level (3), not --reasoning-effort"
        return self.temperature_refused(model, settings)

    def priced_as(self, model: str) -> tuple[str, str]:
        """Gemini on Vertex AI is priced as on the Gemini API (`report.cost` dates the cloud's rows)."""
        return "google", model


def thinking_model(model: str) -> bool:
    """Gemini 2.5 and 3 think before they answer, by default, within the same output cap."""
    return model.removeprefix("models/").lower().startswith(THINKING_GEMINI)


def thinking(model: str, request: ChatRequest) -> tuple[dict[str, Any] | None, int]:
    """The `thinking_config` to send and the room it needs on top of the answer's: a budget as asked (0: no
    thinking), else a level, else (for a thinking model) the provider's own thinking with `THINKING_ROOM`. The
    thoughts are asked for (`include_thoughts`) so that they are read as reasoning, not lost."""
    budget, level = request.thinking_budget, request.thinking_level
    if budget is None and level is None:
        return ({"include_thoughts": True}, THINKING_ROOM) if thinking_model(model) else (None, 0)
    config: dict[str, Any] = {"include_thoughts": bool(budget) or budget is None}
    if budget is not None:
        config["thinking_budget"] = budget
    if level is not None:
        config["thinking_level"] = level
    return config, THINKING_ROOM if budget is None else budget


def chat_arguments(provider: Provider, types: Any, model: str, request: ChatRequest) -> tuple[dict[str, Any], str]:
    """The arguments of `chats.create` (`types`: the SDK's) and the message then sent, as the reference builds them:
    the output cap is the answer's room (2,048 unless `--max-tokens`) plus the room thinking needs."""
    if request.reasoning_effort is not None:
        raise TransportError(
            "rejected",
            "the Gemini API has no reasoning_effort",
            attempts=0,
            fix="it takes --thinking-budget or --thinking-level: drop --reasoning-effort",
        )
    system, turns = split_system(request.messages)
    history = [
        types.Content(role="user" if message.role == "user" else "model", parts=[types.Part(text=message.content)])
        for message in turns[:-1]
    ]
    config_thinking, room = thinking(model, request)
    config: dict[str, Any] = {
        "system_instruction": system,
        "temperature": request.temperature,
        "max_output_tokens": (request.max_tokens or provider.max_tokens or 0) + room,
        "response_mime_type": "application/json" if request.json_mode else None,
        "top_p": request.top_p,
        "seed": request.seed,
    }
    try:
        generation = types.GenerateContentConfig(
            **config, thinking_config=None if config_thinking is None else types.ThinkingConfig(**config_thinking)
        )
    except ValueError as exc:  # a value the SDK's types refuse (a thinking level it does not know)
        message = one_line(f"the google-genai SDK refuses the settings: {exc}", 400)
        fix = refusal_fix(400, ServerError(str(exc)), carried(request)) or "change the generation settings"
        raise TransportError("rejected", message, attempts=0, fix=fix) from None
    arguments = {"model": model, "history": history, "config": generation}
    return arguments, turns[-1].content if turns else ""


def read_reply(result: Any, model: str, latency_s: float, attempts: int, sent: dict[str, Any]) -> ChatResponse:
    """A `ChatResponse` from the SDK's reply: thought parts as reasoning and output, a stop for safety or a blocked
    prompt as the model's refusal."""
    usage = getattr(result, "usage_metadata", None)
    answered = token_count(getattr(usage, "candidates_token_count", None), "usageMetadata.candidatesTokenCount")
    thoughts = getattr(usage, "thoughts_token_count", None)
    thought = None if thoughts is None else token_count(thoughts, "usageMetadata.thoughtsTokenCount")
    version = getattr(result, "model_version", None)
    cached = getattr(usage, "cached_content_token_count", None)
    common: dict[str, Any] = {
        "prompt_tokens": token_count(getattr(usage, "prompt_token_count", None), "usageMetadata.promptTokenCount"),
        # inside promptTokenCount, billed at the cache's rate
        "cached_tokens": None if cached is None else token_count(cached, "usageMetadata.cachedContentTokenCount"),
        "completion_tokens": answered + (thought or 0),  # thinking is billed as output
        "reasoning_tokens": thought,
        "latency_s": latency_s,
        "model": version if isinstance(version, str) and version else model,
        "attempts": attempts,
        "sent": sent,
    }
    candidates = getattr(result, "candidates", None)
    if not candidates:
        return _blocked(getattr(result, "prompt_feedback", None), common)
    finish = getattr(candidates[0], "finish_reason", None)
    finish_reason = getattr(finish, "value", finish) if finish is not None else None
    split = _split_parts(getattr(getattr(candidates[0], "content", None), "parts", None) or [])
    refusal = None
    if finish_reason in SAFETY_STOPS:
        detail = getattr(candidates[0], "finish_message", None) or ""
        refusal = f"stopped for {finish_reason}" + (f": {detail}" if detail else "")
    return ChatResponse(**split.fields(), finish_reason=finish_reason, refusal=refusal, **common)


def _blocked(feedback: Any, common: dict[str, Any]) -> ChatResponse:
    """A reply without candidates: a prompt blocked for safety is the model's refusal; anything else is no response
    at all."""
    reason = getattr(feedback, "block_reason", None)
    if reason is None:
        detail = f" ({one_line(str(feedback))})" if feedback else ""
        raise AttemptFailure("invalid_response", f"the reply has no candidates{detail}")
    reason = str(getattr(reason, "value", reason))
    message = getattr(feedback, "block_reason_message", None) or ""
    refusal = f"prompt blocked: {reason}" + (f": {message}" if message else "")
    return ChatResponse(text="", finish_reason=reason, refusal=refusal, **common)


def _split_parts(parts: list[Any]) -> Split:
    """Gemini's parts: text parts marked `thought` are the reasoning, the other text parts the answer."""
    answer = [part.text for part in parts if isinstance(getattr(part, "text", None), str) and not part.thought]
    split = split_think("".join(answer))
    for part in parts:
        if getattr(part, "thought", None) and isinstance(getattr(part, "text", None), str):
            split.add(part.text, "thought_parts")
    return split


def retry_info_s(details: Any) -> float | None:
    """Gemini's `google.rpc.RetryInfo` (`"retryDelay": "30s"`) from an error body, if it has one."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.fullmatch(str(detail.get("retryDelay", "")))
            if match:
                return float(match[1])
    return None


ROWS = (
    Google("google", "google", "GEMINI_API_KEY", None, max_tokens=SDK_MAX_TOKENS, extra="google", batch="gemini"),
    # Gemini on Vertex AI, under Google Cloud's credentials (`llm.cloud`); requests as built for the Gemini API.
    Google(
        "google-vertex",
        "google",
        "",
        None,
        max_tokens=SDK_MAX_TOKENS,
        extra="vertex",
        keyless=True,
        cloud="vertex",
        base_url_env="GOOGLE_VERTEX_BASE_URL",
        region_env="GOOGLE_CLOUD_LOCATION",
        project_env="GOOGLE_CLOUD_PROJECT",
    ),
)
