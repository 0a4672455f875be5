"""Loopback fakes of today's providers: each refuses what its real API refuses and answers in each shape it documents.

    with OpenAIServer(validator=provider_rules) as server:   # or the `provider_fake` fixture of tests/llm
        server.enqueue(anthropic_reply("answer", thinking="first, ..."))

`provider_rules` checks every request before the queue or the handler sees it, in the provider's own protocol:
- OpenAI's Responses API: the same reasoning rules, the effort as `reasoning.effort`; chat completions answers 404
  for the models served only there (o3-pro, gpt-5-pro, the codex models).
- OpenAI chat completions: the reasoning models (the gpt-5 family, o1, o3, o4-mini) refuse a temperature or top_p
  other than 1, `max_tokens` (they take `max_completion_tokens`) and an effort they do not have; the other models
  refuse `reasoning_effort`. The error bodies are OpenAI's (`unsupported_value`, `unsupported_parameter`).
- Anthropic: the body is held to the installed SDK's own request type (`MessageCreateParamsNonStreaming`): a key the
  API version does not have is `<key>: Extra inputs are not permitted`; then the documented thinking rules (a budget
  of at least 1,024 tokens, below `max_tokens`; adaptive thinking from Claude 4.6; no budget on Claude 4.7 and
  later; thinking never off on Opus 5.5, Fable and Mythos, nor above effort high on Opus 5) and the request header's
  API version.
- Gemini: `generationConfig` is held to the SDK's `GenerationConfig` (REST names, no unknown field); then the
  documented thinking rules per model (2.5: a budget, no level; 3: a level or a budget, not both; earlier models: no
  thinking; 2.5 Pro cannot turn thinking off).

`no_json_mode(status)` plays a server without JSON mode (vLLM without guided decoding, a proxy that allows no POST).
`REFUSALS` plays the other refusals of a request's shape, each in its provider's own error body: Azure's classic
deployment without `api-version`, xAI's camelCase parameter, Ollama's reasoning value, OpenRouter relaying OpenAI's
refusal in `metadata.raw`, a body that is no error object at all; `PROMPT_REFUSALS` the ones that blame the prompt
(context too long, Azure's content filter, OpenRouter's moderation flag).
The reply builders give each documented response shape: reasoning fields and content parts (OpenAI-compatible
servers), thinking and redacted-thinking blocks and refusals (Anthropic), thought parts, safety blocks and
`thoughtsTokenCount` (Gemini), and null content at the length limit.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tests.support.openai_server import (
    AZURE_PATH,
    GEMINI_PATH,
    Dialect,
    RecordedRequest,
    Reply,
    Validator,
    completion_payload,
)

ANTHROPIC_MIN_BUDGET = 1024
GEMINI_MAX_OUTPUT = 65_536
GEMINI_LEVELS = frozenset({"MINIMAL", "LOW", "MEDIUM", "HIGH"})


def provider_rules(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """The refusal the provider's API sends for this request, or None when it accepts it."""
    body = request.json()
    if dialect == "anthropic":
        return _anthropic(body, request.headers)
    if dialect == "google":
        match = GEMINI_PATH.fullmatch(request.path)
        return _gemini(body, match["model"] if match else "")
    if dialect == "responses":
        return _responses(body)
    return _openai(body)


# OpenAI


def openai_error(message: str, param: str | None, code: str, status: int = 400) -> Reply:
    payload = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return Reply.json(payload, status=status)


def _openai_efforts(model: str) -> tuple[str, ...] | None:
    """The efforts a model takes; None for a model without reasoning. gpt-5.1 takes none to high, and the gpt-5
    models after it xhigh too (the reasoning effort's reference,
    https://learn.microsoft.com/en-us/javascript/api/@azure/ai-projects/reasoningeffort)."""
    name = model.rsplit("/", 1)[-1]
    if name.startswith("gpt-5.1"):
        return ("none", "low", "medium", "high")
    if name.startswith("gpt-5."):
        return ("none", "low", "medium", "high", "xhigh")
    if name.startswith("gpt-5"):
        return ("minimal", "low", "medium", "high")
    if len(name) > 1 and name[0] == "o" and name[1].isdigit():
        return ("low", "medium", "high")
    return None


def _responses_only(model: str) -> bool:
    """The models OpenAI serves only through the Responses API: the -pro reasoning models, codex, deep research."""
    name = model.rsplit("/", 1)[-1]
    return (name.startswith(("o1-pro", "o3-pro", "gpt-5-pro", "gpt-5.")) and "-pro" in name) or "codex" in name


def _responses(body: dict[str, Any]) -> Reply | None:
    """The Responses API (https://platform.openai.com/docs/api-reference/responses/create): chat completions'
    `response_format` is refused (JSON mode is `text.format`); the reasoning models refuse a temperature or top_p,
    and take the effort as `reasoning.effort`."""
    if "response_format" in body:
        message = (
            "Unsupported parameter: 'response_format'. In the Responses API, this parameter has moved to 'text.format'."
        )
        return openai_error(message, "response_format", "unsupported_parameter")
    model = str(body.get("model", ""))
    efforts = _openai_efforts(model.replace("-pro", ""))
    if efforts is None:
        return None
    for name in ("temperature", "top_p"):
        if name in body:
            message = f"Unsupported parameter: '{name}' is not supported with this model."
            return openai_error(message, name, "unsupported_parameter")
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None and effort not in efforts:
        message = f"Unsupported value: 'reasoning.effort' does not support '{effort}' with this model."
        return openai_error(message, "reasoning.effort", "unsupported_value")
    return None


def _openai(body: dict[str, Any]) -> Reply | None:
    model = str(body.get("model", ""))
    if _responses_only(model):
        message = "This model is only supported in v1/responses and not in v1/chat/completions."
        return openai_error(message, "model", "", status=404)
    efforts = _openai_efforts(model)
    effort = body.get("reasoning_effort")
    if efforts is None:
        if effort is not None:
            message = "Unsupported parameter: 'reasoning_effort' is not supported with this model."
            return openai_error(message, "reasoning_effort", "unsupported_parameter")
        return None
    if "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        )
        return openai_error(message, "max_tokens", "unsupported_parameter")
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            message = (
                f"Unsupported value: '{name}' does not support {body[name]} with this model. Only the default (1) "
                "value is supported."
            )
            return openai_error(message, name, "unsupported_value")
    if effort is not None and effort not in efforts:
        listed = ", ".join(f"'{value}'" for value in efforts)
        message = f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this model. Supported "
        return openai_error(message + f"values are: {listed}.", "reasoning_effort", "unsupported_value")
    return None


def no_json_mode(status: int = 400) -> Validator:
    """A server without JSON mode: a 400 naming `response_format` (vLLM, llama.cpp builds without grammar), or a
    405 from a proxy in front of it."""

    def refuse(request: RecordedRequest, dialect: Dialect) -> Reply | None:
        if "response_format" not in request.json():
            return None
        if status == 405:
            return Reply.text("Method Not Allowed", status=405, content_type="text/plain")
        return openai_error("response_format is not supported by this server", "response_format", "invalid_value")

    return refuse


def openai_reply(
    content: str | list[Any] | None,
    *,
    reasoning_content: str | None = None,
    reasoning: Any = None,
    reasoning_details: Any = None,
    refusal: str | None = None,
    reasoning_tokens: int | None = None,
    completion_tokens: int = 40,
    finish_reason: str = "stop",
    model: str = "test-model",
    reasoning_tokens_at_top: bool = False,
    usage: dict[str, Any] | None = None,
) -> Reply:
    """A chat completion in any documented shape: `reasoning_content` (DeepSeek, vLLM, SGLang), `reasoning` (vLLM,
    Ollama, OpenRouter), `reasoning_details` (OpenRouter), content as a list of parts (Mistral), a `refusal`, and
    the reasoning tokens as OpenAI (`completion_tokens_details`) or SGLang (`reasoning_tokens`) report them; `usage`
    adds to the usage object: OpenAI's `prompt_tokens_details.cached_tokens`
    (https://platform.openai.com/docs/guides/prompt-caching), OpenRouter's `cost`
    (https://openrouter.ai/docs/use-cases/usage-accounting), xAI's `total_tokens` counting the reasoning tokens that
    `completion_tokens` leaves out (https://docs.x.ai/docs/guides/reasoning)."""
    payload = completion_payload(None, 30, completion_tokens, finish_reason, model)
    message = payload["choices"][0]["message"]
    message["content"] = content
    for name, value in (("reasoning_content", reasoning_content), ("reasoning", reasoning)):
        if value is not None:
            message[name] = value
    if reasoning_details is not None:
        message["reasoning_details"] = reasoning_details
    if refusal is not None:
        message["refusal"] = refusal
    if reasoning_tokens is not None:
        if reasoning_tokens_at_top:
            payload["usage"]["reasoning_tokens"] = reasoning_tokens
        else:
            payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    payload["usage"].update(usage or {})
    return Reply.json(payload)


# Refusals of a request's shape, each in its provider's documented error body.


# The fake's Azure deployments: a deployment's name is the user's, its model Azure's.
AZURE_DEPLOYMENTS = {"eval-mini": "gpt-5-mini", "eval-4o": "gpt-4o"}


def azure_classic(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """Azure OpenAI's classic deployment URL needs `?api-version=` and refuses a request without it; the key goes in
    the `api-key` header, or an Entra ID token as a bearer one
    (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference); the deployment's model then refuses what
    OpenAI's refuses (a gpt-5-mini deployment refuses `max_tokens`, whatever its name)."""
    if "api-version=" not in request.query:
        error = {"code": "BadRequest", "message": "Missing required query parameter: api-version"}
        return Reply.json({"error": error}, status=400)
    if "api-key" not in request.headers and not request.headers.get("authorization", "").startswith("Bearer "):
        message = "Access denied due to invalid subscription key or wrong API endpoint."
        return Reply.json({"error": {"code": "401", "message": message}}, status=401)
    match = AZURE_PATH.fullmatch(request.path)
    model = AZURE_DEPLOYMENTS.get(match["deployment"], "") if match else ""
    return _openai({**request.json(), "model": model})


def xai_rules(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """xAI: only grok-3-mini takes `reasoning_effort`; the grok-4 models refuse it, naming it in camelCase, in xAI's
    `{"code", "error"}` body (https://docs.x.ai/docs/guides/reasoning, https://docs.x.ai/docs/key-information/debugging)."""
    body = request.json()
    model = str(body.get("model", ""))
    if "reasoning_effort" in body and not model.startswith("grok-3-mini"):
        message = f"Model {model} does not support parameter reasoningEffort."
        return Reply.json({"code": "Client specified an invalid argument", "error": message}, status=400)
    return None


def ollama_rules(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """Ollama's OpenAI-compatible endpoint takes `reasoning_effort` high, medium, low or none, and refuses any other
    value in OpenAI's error shape (https://docs.ollama.com/api/openai-compatibility)."""
    effort = request.json().get("reasoning_effort")
    if effort is None or effort in ("high", "medium", "low", "none"):
        return None
    message = f'invalid reasoning value: \'{effort}\' (must be "high", "medium", "low", or "none")'
    return openai_error(message, None, "invalid_request_error")


def openrouter_rules(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """OpenRouter: a setting that no provider of the model lists is dropped without a word, unless the request asks
    `provider.require_parameters`, which answers 404 `No endpoints found that can handle the requested parameters`
    (https://openrouter.ai/docs/features/provider-routing#requiring-providers-to-support-all-parameters); here
    OpenAI's gpt-5 lists no temperature. Where OpenRouter passes the request on (o3), it relays the upstream
    provider's refusal: its own message is `Provider returned error`, the provider's body is in `error.metadata.raw`
    (https://openrouter.ai/docs/api/reference/errors-and-debugging)."""
    body = request.json()
    model = str(body.get("model", "")).removeprefix("openai/")
    if model.startswith("gpt-5") and body.get("temperature", 1) != 1:
        if (body.get("provider") or {}).get("require_parameters"):
            error = {"code": 404, "message": "No endpoints found that can handle the requested parameters."}
            return Reply.json({"error": error}, status=404)
        return None  # dropped silently: the reason to ask require_parameters
    upstream = _openai({**body, "model": model})
    if upstream is None:
        return None
    metadata = {"raw": upstream.body.decode(), "provider_name": "OpenAI"}
    return Reply.json({"error": {"code": 400, "message": "Provider returned error", "metadata": metadata}}, status=400)


def malformed_error(request: RecordedRequest, dialect: Dialect) -> Reply | None:
    """A proxy's refusal whose body is no error object at all (an HTML page)."""
    return Reply.text(
        "<html><body><h1>400 Bad Request</h1>Request Header Or Cookie Too Large</body></html>", status=400
    )


# Refusals that blame the prompt: the model's `request_rejected`.
CONTEXT_TOO_LONG = openai_error(
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    "messages",
    "context_length_exceeded",
)
AZURE_CONTENT_FILTER = Reply.json(
    {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
            "policy. Please modify your prompt and retry.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    },
    status=400,
)
OPENROUTER_FLAGGED = Reply.json(
    {
        "error": {
            "code": 403,
            "message": 'openai/gpt-4o requires moderation on OpenAI. Your input was flagged for "violence".',
            "metadata": {"reasons": ["violence"], "flagged_input": "...", "provider_name": "OpenAI"},
        }
    },
    status=403,
)


# Anthropic


def anthropic_error(message: str, status: int = 400, kind: str = "invalid_request_error") -> Reply:
    return Reply.json({"type": "error", "error": {"type": kind, "message": message}}, status=status)


def _anthropic_request_type() -> tuple[Any, frozenset[str], str]:
    params = importlib.import_module("anthropic.types.message_create_params").MessageCreateParamsNonStreaming
    version = importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION
    return params, frozenset(params.__required_keys__ | params.__optional_keys__), version


def _anthropic(body: dict[str, Any], headers: Mapping[str, str]) -> Reply | None:
    params, keys, version = _anthropic_request_type()
    if headers.get("anthropic-version") != version:
        return anthropic_error(f"anthropic-version: this fake speaks {version} only")
    for key in body:
        if key not in keys:
            return anthropic_error(f"{key}: Extra inputs are not permitted")
    try:
        TypeAdapter(params).validate_python(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return anthropic_error(f"{where}: {error['msg']}")
    thinking = body.get("thinking") or {}
    effort = (body.get("output_config") or {}).get("effort")
    refusal = _claude_thinking(str(body.get("model", "")), thinking.get("type"), effort)
    if refusal is not None:
        return anthropic_error(refusal)
    if thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens", 0)
        if budget < ANTHROPIC_MIN_BUDGET:
            return anthropic_error(
                f"thinking.enabled.budget_tokens: Input should be greater than or equal to {ANTHROPIC_MIN_BUDGET}"
            )
        if body["max_tokens"] <= budget:
            return anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`")
    return None


def _claude_thinking(model: str, kind: Any, effort: Any) -> str | None:
    """Claude's thinking per model: adaptive thinking came with Claude 4.6
    (https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking); Claude 4.7 and later of every family
    refuse budget thinking (https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting); Opus 5.5
    and the Fable and Mythos models refuse thinking turned off, Opus 5 above effort high
    (https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5,
    https://platform.claude.com/docs/en/about-claude/models/whats-new-opus-5)."""
    match = re.search(r"claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2})(?!\d))?(?:-\d{8})?$", model)
    family, version = (match[1], (int(match[2]), int(match[3] or 0))) if match else ("", (0, 0))
    steer = 'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
    if kind == "enabled" and version >= (4, 7):
        return f'"thinking.type.enabled" is not supported for this model. {steer}'
    always = family in ("fable", "mythos") or (family == "opus" and version >= (5, 5))
    if kind == "disabled" and always:
        return f'"thinking.type.disabled" is not supported for this model. {steer}'
    if kind == "disabled" and family == "opus" and version >= (5, 0) and effort in ("xhigh", "max"):
        return f'"thinking.type.disabled" is supported for this model only with effort "high" or lower. {steer}'
    if kind == "adaptive" and version < (4, 6):
        return "thinking.type.adaptive is not supported for this model."
    return None


def anthropic_reply(
    text: str | None,
    *,
    thinking: str | None = None,
    redacted: bool = False,
    stop_reason: str = "end_turn",
    output_tokens: int = 40,
    thinking_tokens: int | None = None,
    extra_blocks: list[dict[str, Any]] | None = None,
    cache_read: int | None = None,
    cache_write: int | None = None,
    input_tokens: int = 30,
) -> Reply:
    """A Messages API reply: thinking and redacted-thinking blocks before the text, as the API orders them; the
    prompt cache's `cache_read_input_tokens` and `cache_creation_input_tokens` apart from `input_tokens`
    (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)."""
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig-test"})
    if redacted:
        content.append({"type": "redacted_thinking", "data": "EncryptedThinking=="})
    if text is not None:
        content.append({"type": "text", "text": text})
    content += extra_blocks or []
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    payload = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    return Reply.json(payload)


class AnthropicPromptCache:
    """Anthropic's prompt cache as documented (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching),
    as a validator: a request with more than four `cache_control` blocks is refused; else the longest marked prefix
    seen before is read from the cache, the rest up to the last breakpoint written to it, and a prefix under
    `minimum` tokens is not cached. A token is four characters here. The reply is `text`, with that usage."""

    BREAKPOINTS = 4

    def __init__(self, text: str = "{}", minimum: int = 1024) -> None:
        self.text, self.minimum = text, minimum
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest, dialect: Dialect) -> Reply | None:
        refused = provider_rules(request, dialect)
        if refused is not None or dialect != "anthropic":
            return refused
        blocks = _anthropic_blocks(request.json())
        marked = [i for i, block in enumerate(blocks) if "cache_control" in block]
        if len(marked) > self.BREAKPOINTS:
            return anthropic_error(f"A maximum of 4 blocks with cache_control may be provided. Found {len(marked)}.")
        sizes = [len(block["text"]) // 4 for block in blocks]
        ends = [end for end in (i + 1 for i in marked) if sum(sizes[:end]) >= self.minimum]
        unmarked = [{name: value for name, value in block.items() if name != "cache_control"} for block in blocks]
        keys = {end: json.dumps(unmarked[:end]) for end in ends}
        with self._lock:
            hit = max((end for end in ends if keys[end] in self._seen), default=0)
            self._seen.update(keys.values())
        last = max(ends, default=0)
        read, written = sum(sizes[:hit]), sum(sizes[hit:last])
        fresh = sum(sizes) - read - written
        return anthropic_reply(self.text, input_tokens=fresh, cache_read=read, cache_write=written)


def _anthropic_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt as the cache sees it: the system blocks, then each turn's blocks, in order (a plain string is one
    text block)."""

    def blocks(content: Any, role: str) -> list[dict[str, Any]]:
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        return [{**part, "role": role} for part in parts]

    system = body.get("system")
    found = blocks(system, "system") if system else []
    for message in body.get("messages", []):
        found += blocks(message["content"], message["role"])
    return found


# Gemini

_GEMINI_KEYS = frozenset(
    {"contents", "systemInstruction", "generationConfig", "safetySettings", "tools", "toolConfig", "cachedContent"}
)


def gemini_error(message: str, status: int = 400) -> Reply:
    return Reply.json({"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}, status=status)


def _gemini(body: dict[str, Any], model: str) -> Reply | None:
    types = importlib.import_module("google.genai.types")
    for key in body:
        if key not in _GEMINI_KEYS:
            return gemini_error(f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
    config = body.get("generationConfig") or {}
    try:
        types.GenerationConfig.model_validate(config)
    except ValidationError as exc:
        name = ".".join(str(part) for part in exc.errors()[0]["loc"])
        return gemini_error(f"Invalid JSON payload received. Unknown name \"{name}\" at 'generation_config'.")
    thinking = config.get("thinkingConfig")
    refusal = _gemini_thinking(model, thinking) if thinking is not None else None
    if refusal is None and config.get("maxOutputTokens", 0) > GEMINI_MAX_OUTPUT:
        refusal = f"maxOutputTokens is out of range: the model's output limit is {GEMINI_MAX_OUTPUT}."
    return None if refusal is None else gemini_error(refusal)


def _gemini_thinking(model: str, thinking: dict[str, Any]) -> str | None:
    """The documented rules of `thinkingConfig` for each model family. Its fields are read under either JSON name
    (the API's protobuf JSON takes `thinkingBudget` and `thinking_budget` alike, and the SDK sends the latter)."""
    budget = thinking.get("thinkingBudget", thinking.get("thinking_budget"))
    level = thinking.get("thinkingLevel", thinking.get("thinking_level"))
    level = None if level is None else str(level).upper()
    if not model.startswith(("gemini-2.5", "gemini-3")):
        return "Thinking is not supported by this model (thinkingConfig)."
    if budget is not None and level is not None:
        return "You can only set either thinkingBudget or thinkingLevel, not both."
    if level is not None and level not in GEMINI_LEVELS:
        return f"Invalid value at 'generation_config.thinking_config.thinking_level', \"{level}\""
    if level == "MINIMAL" and model.startswith("gemini-3") and "-pro" in model:
        # Gemini 3 Pro thinks at low or high only (https://ai.google.dev/gemini-api/docs/thinking#thinking-levels).
        return f"Thinking level {level} is not supported for this model."
    if model.startswith("gemini-2.5"):
        if level is not None:
            return "thinkingLevel is not supported for this model: use thinkingBudget."
        if budget == 0 and model.startswith("gemini-2.5-pro"):
            return "Budget 0 is invalid. This model only works in thinking mode (thinkingBudget)."
        if budget is not None and not 0 <= budget <= 32_768:
            return "thinkingBudget is out of range: 0 to 32768."
    return None


def gemini_reply(
    text: str | None,
    *,
    thoughts: str | None = None,
    answer_tokens: int = 40,
    thoughts_tokens: int | None = None,
    finish: str = "STOP",
    block_reason: str | None = None,
    cached_tokens: int | None = None,
) -> Reply:
    """A generateContent reply: thought parts (`"thought": true`) before the answer's part, `thoughtsTokenCount`
    apart from `candidatesTokenCount` (as the API reports them), a prompt blocked for safety (no candidates)."""
    usage: dict[str, Any] = {"promptTokenCount": 30, "candidatesTokenCount": answer_tokens}
    if thoughts_tokens is not None:
        usage["thoughtsTokenCount"] = thoughts_tokens
    if cached_tokens is not None:  # inside promptTokenCount (https://ai.google.dev/gemini-api/docs/caching)
        usage["cachedContentTokenCount"] = cached_tokens
    usage["totalTokenCount"] = 30 + answer_tokens + (thoughts_tokens or 0)
    if block_reason is not None:
        feedback = {"blockReason": block_reason, "blockReasonMessage": "The prompt was blocked."}
        return Reply.json({"promptFeedback": feedback, "usageMetadata": usage, "modelVersion": "gemini-test"})
    parts: list[dict[str, Any]] = []
    if thoughts is not None:
        parts.append({"text": thoughts, "thought": True})
    if text is not None:
        parts.append({"text": text})
    candidate = {"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}
    return Reply.json({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-test"})


def json_of(reply: Reply) -> Any:
    return json.loads(reply.body)
