"""`anthropic:<model>`: Claude through Anthropic's Messages API (the official SDK, extra `anthropic`), and the same
requests on Amazon Bedrock (`anthropic-bedrock:`) and Vertex AI (`anthropic-vertex:`) under the cloud's credentials
(`llm.cloud`).

What is sent: the system message apart as `system`, the other turns as they are, `max_tokens` (2,048 unless
`--max-tokens`, plus the thinking budget or adaptive thinking's room); the temperature only where the installed SDK's
API version has one (2026-10-21 has none); `thinking` and `output_config.effort` when asked for (an effort turns on
adaptive thinking on Claude 4.6 and later); adaptive thinking, asked for as such, on Claude 5 and later, which think
unasked; no JSON mode (the API has none) and no seed. Thinking and redacted-thinking blocks are the reasoning; the
first text block the answer. What the API refuses (a thinking budget on Claude 4.7 and later, thinking turned off on
a model that always thinks, a temperature its version lacks, thinking without temperature 1, a budget under 1,024)
is an error before any request."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from edsb.llm.errors import TransportError
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, Message
from edsb.llm.providers.base import LEVEL_IS_GEMINIS, GenerationSettings, Provider
from edsb.llm.reasoning import REDACTED, Split, split_think
from edsb.llm.remote import token_count
from edsb.llm.retry import AttemptFailure

# The reference caps Anthropic's and Google's replies at 2,048 tokens and sends no cap to the OpenAI-compatible hosts.
SDK_MAX_TOKENS = 2048
ANTHROPIC_MIN_THINKING = 1024  # the smallest `budget_tokens` Anthropic's extended thinking accepts
# The room Claude's adaptive thinking gets on top of the answer's, as a thinking budget would: its thinking shares
# `max_tokens` with the answer, so without room it could cut the answer short.
ADAPTIVE_ROOM = 16_384
# Anthropic's prompt-cache breakpoint (the 5-minute lifetime, written at 1.25 times the input price).
EPHEMERAL = {"type": "ephemeral"}

# Claude's thinking by model, as Anthropic's documentation gives it on 2026-12-06. Claude 4.6 and later take adaptive
# thinking (`thinking: {type: adaptive}`, its depth set by `output_config.effort`;
# https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking); Claude 4.7 and later, of every family,
# refuse a thinking budget with a 400 (https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting).
# Claude 5 and later think by default: a request without `thinking` thinks, and its thinking counts toward
# `max_tokens` (https://platform.claude.com/docs/en/models/opus-5/migration-guide, .../models/sonnet-5/overview,
# .../models/haiku-5-5/whats-new-haiku-5-5). Opus 5.5 and every Fable and Mythos model always think: `thinking:
# {type: disabled}` is a 400 (https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5, the models
# overview's "Adaptive (always on)"); Opus 5 turns thinking off only at effort high or below
# (https://platform.claude.com/docs/en/about-claude/models/whats-new-opus-5). The SDK names the models but not what
# each takes, hence these tables.
ADAPTIVE_SINCE = (4, 6)
BUDGET_REFUSED_SINCE = (4, 7)
THINKS_BY_DEFAULT_SINCE = (5, 0)
ALWAYS_THINKS_SINCE = {"opus": (5, 5), "fable": (5, 0), "mythos": (5, 0)}
OFF_UP_TO_HIGH_SINCE = {"opus": (5, 0)}  # thinking off only at effort high or below
EFFORTS_ABOVE_HIGH = frozenset({"xhigh", "max"})
_CLAUDE = re.compile(
    r"claude-(?P<family>opus|sonnet|haiku|fable|mythos)-(?P<major>\d+)(?:-(?P<minor>\d{1,2})(?!\d))?(?:-\d{8})?"
)
# A cloud's name for a Claude model: Bedrock's `[us.|eu.|global.]anthropic.<model>-v1:0`, Vertex AI's `<model>@<date>`.
_CLOUD_NAME = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.|-v\d+(?::\d+)?$|@\d{8}$")


@cache
def anthropic_api() -> tuple[str, frozenset[str]] | None:
    """The Messages API version the installed `anthropic` SDK speaks and the parameters its request type names (that
    version's API: 2026-10-21 has no `temperature`, `top_p` or `top_k`); None without the SDK. Read once, for the
    client's requests and for the checks made before any request."""
    try:
        version = importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION
        params = importlib.import_module("anthropic.types.message_create_params").MessageCreateParamsNonStreaming
    except ImportError:
        return None
    return str(version), frozenset(params.__required_keys__ | params.__optional_keys__)


def temperature_api() -> tuple[str | None, bool]:
    """(the Messages API version the installed SDK speaks, whether its requests carry `temperature`); (None, True)
    when the SDK is not installed (building the model then says which extra to install)."""
    api = anthropic_api()
    return (None, True) if api is None else (api[0], "temperature" in api[1])


def api_version() -> str:
    """The Messages API version the installed SDK speaks (its `anthropic-version` header)."""
    api = anthropic_api()
    return api[0] if api is not None else "unknown"


def takes(name: str) -> bool:
    """Whether the installed SDK's `messages.create` takes `name` (the API version's parameters)."""
    api = anthropic_api()
    return api is not None and name in api[1]


def claude_version(model: str) -> tuple[str, tuple[int, int]] | None:
    """A Claude model's family and version (`claude-opus-4-7` is opus 4.7), under any `org/` or `anthropic.`
    prefix; None for a name of another shape."""
    match = _CLAUDE.search(model.lower())
    if match is None:
        return None
    return match["family"], (int(match["major"]), int(match["minor"] or 0))


def _since(model: str, since: tuple[int, int] | Mapping[str, tuple[int, int]]) -> bool:
    """Whether the model is a Claude of at least this version (of its family, where `since` is by family)."""
    found = claude_version(model)
    if found is None:
        return False
    least = since.get(found[0]) if isinstance(since, Mapping) else since
    return least is not None and found[1] >= least


def claude_adaptive(model: str) -> bool:
    """Whether the model takes adaptive thinking."""
    return _since(model, ADAPTIVE_SINCE)


def claude_refuses_budget(model: str) -> bool:
    """Whether the model refuses a thinking budget (adaptive thinking only)."""
    return _since(model, BUDGET_REFUSED_SINCE)


def claude_thinks_by_default(model: str) -> bool:
    """Whether the model thinks when the request says nothing of thinking, within `max_tokens`."""
    return _since(model, THINKS_BY_DEFAULT_SINCE)


def claude_always_thinks(model: str) -> bool:
    """Whether the model refuses to have its thinking turned off."""
    return _since(model, ALWAYS_THINKS_SINCE)


def _thinking_refused(model: str, settings: GenerationSettings) -> str | None:
    """What the model refuses of the thinking settings, with the option that fixes it; None if nothing."""
    budget, effort = settings.thinking_budget, settings.reasoning_effort
    if budget and claude_refuses_budget(model):
        return (
            f"{model} takes no thinking budget, only adaptive thinking: "
            "pass --reasoning-effort LEVEL instead of --thinking-budget"
        )
    if budget == 0 and claude_always_thinks(model):
        return (
            f"{model} always thinks (adaptive thinking cannot be turned off): drop --thinking-budget 0; "
            "--reasoning-effort low thinks least"
        )
    if budget == 0 and effort in EFFORTS_ABOVE_HIGH and _since(model, OFF_UP_TO_HIGH_SINCE):
        return (
            f"{model} turns thinking off only at effort high or below: "
            "lower --reasoning-effort or drop --thinking-budget 0"
        )
    return None


@dataclass(frozen=True)
class Anthropic(Provider):
    """Claude, directly or on a cloud: the same requests, the same rules."""

    def client(self, model: str, options: dict[str, Any], *, prompt_cache: bool) -> ChatModel:
        from edsb.llm.sdk_client import AnthropicChatModel

        return AnthropicChatModel(model, self, prompt_cache=prompt_cache, **options)

    def refuses(self, model: str, settings: GenerationSettings) -> str | None:
        if settings.thinking_level is not None:
            return LEVEL_IS_GEMINIS
        version, takes_temperature = temperature_api()
        refused = _thinking_refused(model, settings)
        if refused is not None:
            return refused
        thinking = settings.thinking_budget is not None
        if settings.temperature is not None and not takes_temperature:
            return (
                f"Anthropic's Messages API version {version} (the installed anthropic SDK's) has no temperature: "
                "leave out --temperature or pass --temperature default"
            )
        if (thinking or claude_thinks_by_default(model)) and settings.temperature not in (None, 1.0):
            return "Anthropic's extended thinking requires temperature 1: pass --temperature default"
        if thinking and settings.thinking_budget is not None and settings.thinking_budget < ANTHROPIC_MIN_THINKING:
            return f"Anthropic's thinking budget is at least {ANTHROPIC_MIN_THINKING} tokens: raise --thinking-budget"
        return None

    def temperature_not_sent(self, model: str, settings: Mapping[str, Any]) -> str | None:
        version, takes_temperature = temperature_api()
        if not takes_temperature:
            return f"Anthropic's Messages API version {version} (the installed anthropic SDK's) has no temperature"
        if settings.get("thinking_budget") is not None or claude_thinks_by_default(model):
            return "Anthropic's extended thinking takes only temperature 1, the API's default"
        return None

    def json_mode_not_sent(self) -> str | None:
        return "Anthropic's Messages API has no JSON mode; JSON is asked for in the prompt only"

    def no_seed(self) -> str:
        return "Anthropic's Messages API has none"

    def priced_as(self, model: str) -> tuple[str, str]:
        """A cloud's Claude is priced as Anthropic's model of that name (`report.cost` dates the cloud's rows):
        Bedrock's `us.anthropic.claude-sonnet-4-5-20250929-v1:0` and Vertex AI's `claude-sonnet-4-5@20250929` are
        `claude-sonnet-4-5-20250929`."""
        return "anthropic", _CLOUD_NAME.sub("", model)


def split_system(messages: tuple[Message, ...]) -> tuple[str | None, list[Message]]:
    """The leading system message apart from the turns, as Anthropic's and Google's APIs take it."""
    if messages and messages[0].role == "system":
        return messages[0].content, list(messages[1:])
    return None, list(messages)


def messages_body(provider: Provider, model: str, request: ChatRequest, *, prompt_cache: bool) -> dict[str, Any]:
    """The keyword arguments of `messages.create`: the system message apart, the turns as they are, `max_tokens` the
    answer's room plus any thinking budget; thinking and effort when asked for. The sampling settings go only where
    the installed SDK's API version has them (its request type names them): version 2026-10-21 has none, and `sent`
    records that none went. No JSON mode (the API has none) and no seed."""
    system, turns = split_system(request.messages)
    budget = request.thinking_budget
    room = request.max_tokens or provider.max_tokens or 0
    sent_turns = [{"role": turn.role, "content": turn.content} for turn in turns]
    params: dict[str, Any] = {"model": model, "messages": sent_turns, "max_tokens": room + (budget or 0)}
    if system is not None:
        params["system"] = system
    if prompt_cache:
        _mark_shared_prefix(params)
    for name, value in (("temperature", request.temperature), ("top_p", request.top_p)):
        if value is not None and takes(name):  # never what the API version lacks (`sent` shows it)
            params[name] = value
    if request.thinking_level is not None:
        raise TransportError(
            "rejected",
            f"Anthropic's Messages API version {api_version()} has no thinking level",
            attempts=0,
            fix="it takes --thinking-budget and --reasoning-effort: drop --thinking-level",
        )
    if budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"}
    if request.reasoning_effort is not None:
        params["output_config"] = {"effort": request.reasoning_effort}
    # The effort sets how deep it thinks; Claude 5 and later think unasked, within `max_tokens`: either way its
    # thinking is asked for as it runs, summarized and kept as reasoning, with room of its own beside the answer's.
    adaptive = request.reasoning_effort is not None and claude_adaptive(model)
    if budget is None and (adaptive or claude_thinks_by_default(model)):
        params["thinking"] = {"type": "adaptive", "display": "summarized"}
        params["max_tokens"] += ADAPTIVE_ROOM
    return params


def messages_sent(params: dict[str, Any], *, prompt_cache: bool) -> dict[str, Any]:
    """What of the request to record as sent: the API version and the settings, and a cache breakpoint if any."""
    sent: dict[str, Any] = {"anthropic-version": api_version()}
    sent.update((name, value) for name, value in params.items() if name not in ("model", "messages", "system"))
    if prompt_cache and _marked(params):
        sent["cache_control"] = EPHEMERAL["type"]
    return sent


def _cached_block(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


def _mark_shared_prefix(params: dict[str, Any]) -> None:
    """Cache breakpoints on the prefix every request of a stage shares: the system prompt (the same for every case
    of a variant) and the last example turn (the same for every case with the same tags). Each marked text goes as
    one text block holding the very same string, so the model sees the same tokens; two of the API's four
    breakpoints. A prefix under the model's minimum cacheable length is simply not cached."""
    if isinstance(params.get("system"), str):
        params["system"] = _cached_block(params["system"])
    messages = params["messages"]
    if len(messages) >= 2:  # the turns before the run's own query are the examples
        shot = messages[-2]
        messages[-2] = {**shot, "content": _cached_block(shot["content"])}


def _marked(params: dict[str, Any]) -> bool:
    """Whether a cache breakpoint went out (a lone query without a system prompt has none)."""
    turns = [params.get("system"), *(message["content"] for message in params["messages"])]
    return any(isinstance(content, list) for content in turns)


def read_message(result: Any, model: str, latency_s: float, attempts: int, sent: dict[str, Any]) -> ChatResponse:
    """A `ChatResponse` from the SDK's message: the blocks split, the usage as billed, a refusal kept as such."""
    content = getattr(result, "content", None)
    usage = getattr(result, "usage", None)
    if not isinstance(content, list) or usage is None:
        raise AttemptFailure("invalid_response", "the reply is not a message (no content or usage)")
    split = _split_blocks(content)
    reported = getattr(result, "model", None)
    stop = getattr(result, "stop_reason", None)
    details = getattr(usage, "output_tokens_details", None)
    thinking = getattr(details, "thinking_tokens", None)
    return ChatResponse(
        **split.fields(),
        **_input_usage(usage),
        completion_tokens=token_count(getattr(usage, "output_tokens", None), "usage.output_tokens"),
        reasoning_tokens=None if thinking is None else token_count(thinking, "usage.output_tokens_details"),
        latency_s=latency_s,
        model=reported if isinstance(reported, str) and reported else model,
        finish_reason=stop if isinstance(stop, str) else None,
        attempts=attempts,
        refusal=(split.answer or "the model refused (stop_reason refusal)") if stop == "refusal" else None,
        sent=sent,
    )


def _input_usage(usage: Any) -> dict[str, Any]:
    """Anthropic's input as billed: `input_tokens` counts only what follows the last cache breakpoint, so the prompt
    is it plus the tokens read from the cache (`cache_read_input_tokens`) and written to it
    (`cache_creation_input_tokens`), each billed at its own rate."""
    read = getattr(usage, "cache_read_input_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    cached = None if read is None else token_count(read, "usage.cache_read_input_tokens")
    creation = None if written is None else token_count(written, "usage.cache_creation_input_tokens")
    fresh = token_count(getattr(usage, "input_tokens", None), "usage.input_tokens")
    return {
        "prompt_tokens": fresh + (cached or 0) + (creation or 0),
        "cached_tokens": cached,
        "cache_write_tokens": creation,
    }


def _split_blocks(content: list[Any]) -> Split:
    """Anthropic's content blocks: the first text block is the answer (as the reference reads it), thinking and
    redacted-thinking blocks the reasoning; other blocks are noted and left out."""
    texts = [block.text for block in content if getattr(block, "type", None) == "text"]
    split = split_think(texts[0] if texts and isinstance(texts[0], str) else "")
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "thinking":
            thinking = getattr(block, "thinking", None)
            if isinstance(thinking, str):
                split.add(thinking, "thinking_blocks")
            else:
                split.add("", "unreadable: a thinking block")
        elif kind == "redacted_thinking":
            split.add(REDACTED, "thinking_blocks")
        elif kind != "text":
            split.add("", f"unreadable: a content block of type {kind!r}")
    return split


_CLAUDE_DEFAULTS: dict[str, Any] = {"max_tokens": SDK_MAX_TOKENS, "takes_seed": False}
ROWS = (
    Anthropic(
        "anthropic", "anthropic", "ANTHROPIC_API_KEY", None, extra="anthropic", batch="anthropic", **_CLAUDE_DEFAULTS
    ),
    # Claude on the clouds, under the cloud's own credentials (`llm.cloud`); requests as built for the direct API.
    # `key_env`: where an access token or Bedrock API key may be given instead.
    Anthropic(
        "anthropic-bedrock",
        "anthropic",
        "AWS_BEARER_TOKEN_BEDROCK",
        None,
        extra="bedrock",
        keyless=True,
        cloud="bedrock",
        base_url_env="ANTHROPIC_BEDROCK_BASE_URL",
        region_env="AWS_REGION",
        **_CLAUDE_DEFAULTS,
    ),
    Anthropic(
        "anthropic-vertex",
        "anthropic",
        "",
        None,
        extra="vertex",
        keyless=True,
        cloud="vertex",
        base_url_env="ANTHROPIC_VERTEX_BASE_URL",
        region_env="CLOUD_ML_REGION",
        project_env="ANTHROPIC_VERTEX_PROJECT_ID",
        **_CLAUDE_DEFAULTS,
    ),
)
