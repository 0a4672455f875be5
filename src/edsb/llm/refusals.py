"""Who a refused request is the fault of: this prompt, or the request's shape (a setting, a field, the address).

A 4xx is the model's `request_rejected` only when the provider says this prompt is at fault: it is too long for the
context, or its content was blocked (a content filter, a moderation flag). Every other refusal is configuration:
every run would be refused alike, so the sweep stops at the first one, scores nothing and names the fix.

The server's words are read from its structured fields first (`read_error`): OpenAI's `error.param` and `code`
(and Azure's `innererror`), OpenRouter's `error.metadata.raw` (the relayed provider's own error) and its moderation
`metadata.reasons`, xAI's `{"code", "error"}`, Gemini's `error.status` and `fieldViolations`, Anthropic's
`error.type`, FastAPI's `detail[].loc`. A parameter named in camelCase, snake_case or as a dotted path is the same
parameter (`reasoningEffort`, `reasoning_effort`, `output_config.effort`). The fix names the option of the request
that maps to the refused field, preferring the one the request carried (`--thinking-level` over `--thinking-budget`
for `Thinking level MINIMAL is not supported`); where none maps, it says what was refused and that nothing was
scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from edsb.llm.protocol import CAP_FIELDS

# The HTTP statuses that a later attempt may pass (rate limits, a proxy's timeout, a conflict): never a refusal.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Statuses that refuse the client (bad key, forbidden, unknown model or endpoint): no request of this run can succeed.
REFUSED_CLIENT_STATUSES = frozenset({401, 403, 404})
TOO_LARGE = 413  # the body is over the server's size: this prompt, too long
METHOD_NOT_ALLOWED = 405
SHAPE_STATUSES = frozenset({400, 422})  # what a server answers a request whose shape it refuses
METHOD_FIX = "check that --base-url ends in /v1; a server without JSON mode: pass --no-json-mode"
SHAPE_FIX = "the server refused the request's shape, not this prompt: nothing was scored; change what its message names"

# What says that this prompt is at fault, by code (squashed: lower case, no `_`) and by phrase.
_PROMPT_CODES = frozenset(
    {
        "contextlengthexceeded",  # OpenAI, Azure, DeepSeek, Mistral
        "stringabovemaxlength",
        "contentfilter",  # Azure OpenAI's content filter
        "contentpolicyviolation",
        "responsibleaipolicyviolation",  # Azure's innererror
        "promptblocked",
    }
)
_PROMPT_PHRASES = (
    "context length",
    "context window",
    "context size",
    "maximum context",
    "context_length",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "too many input tokens",
    "exceeds the maximum number of tokens",
    "reduce the length",
    "content management policy",
    "content filter",
    "content_filter",
    "content policy",
    "input was flagged",
)

# The options of a run, each with its fix, and the field names that map to them (snake_case; camelCase and dotted
# paths are brought to these). A name mapping to several options names the one the request carried.
_OPTION_FIXES = {
    "temperature": "the model takes no temperature but its default: pass --temperature default",
    "top_p": "the model takes no top_p: leave it unset",
    "max_tokens": "the model refuses this token cap or its name: change or drop --max-tokens",
    "reasoning_effort": "the model refuses this reasoning effort: change or drop --reasoning-effort",
    "thinking_level": "the model refuses this thinking level: change or drop --thinking-level",
    "thinking_budget": "the model refuses this thinking budget: change or drop --thinking-budget",
    "json_mode": "the server has no JSON mode: pass --no-json-mode",
    "seed": "the model takes no seed: drop --model-seed",
}
_THINKING = ("thinking_budget", "thinking_level")
_FIELD_OPTIONS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    **{name: ("max_tokens",) for name in CAP_FIELDS},
    "reasoning_effort": ("reasoning_effort",),
    "effort": ("reasoning_effort",),
    "reasoning": ("reasoning_effort", *_THINKING),
    "thinking_level": ("thinking_level",),
    "thinking_budget": ("thinking_budget",),
    "budget_tokens": ("thinking_budget",),
    "thinking": (*_THINKING, "reasoning_effort"),
    "thinking_config": _THINKING,
    "response_format": ("json_mode",),
    "json_object": ("json_mode",),
    "json_mode": ("json_mode",),
    "response_mime_type": ("json_mode",),
    "seed": ("seed",),
}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class ServerError:
    """A refusal as the server worded it: its whole message, the fields it names, its codes, and whether it flagged
    the prompt's content (OpenRouter's moderation)."""

    message: str
    fields: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    flagged: bool = False


class Verdict(NamedTuple):
    """`prompt_fault`: the model's `request_rejected`; `fix`: configuration, and what to change (None: neither)."""

    prompt_fault: bool
    fix: str | None


def read_error(body: bytes, status: int) -> ServerError:
    """The server's refusal from its body, in whichever provider's shape; the body's text when it has none."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text) if text.strip() else None
    except (ValueError, RecursionError):
        data = None
    error = _read(data) if isinstance(data, dict) else None
    if error is not None and error.message:
        return error
    message = _flat(text) or f"HTTP {status} with an empty body"
    return ServerError(message, *(() if error is None else (error.fields, error.codes, error.flagged)))


def _read(data: dict[str, Any]) -> ServerError | None:
    """An error object: `{"error": {...}}` (OpenAI, Azure, OpenRouter, Gemini, Anthropic, Ollama's compat layer),
    `{"error": "...", "code": "..."}` (xAI, Ollama), `{"message": ..., "param": ...}` (vLLM), `{"detail": [...]}`."""
    error = data.get("error", data)
    if isinstance(error, str):
        return ServerError(_flat(error), codes=_strings([data.get("code")]))
    if not isinstance(error, dict):
        return None
    said = error.get("message")
    message = said if isinstance(said, str) else ""
    fields = [error.get("param"), *_violations(error), *_locations(data.get("detail"))]
    inner = error.get("innererror")
    codes = [
        error.get("code"),
        error.get("type"),
        error.get("status"),
        inner.get("code") if isinstance(inner, dict) else None,
    ]
    found = error.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    relayed = _relayed(metadata.get("raw"))
    if relayed is not None:  # OpenRouter: its own message is only "Provider returned error"
        provider = metadata.get("provider_name")
        where = f" ({provider})" if isinstance(provider, str) else ""
        message = f"{message}{where}: {relayed.message}" if message else relayed.message
        fields += relayed.fields
        codes += relayed.codes
    flagged = bool(metadata.get("flagged_input") or metadata.get("reasons")) or (
        relayed is not None and relayed.flagged
    )
    return ServerError(_flat(message), _strings(fields), _strings(codes), flagged)


def _relayed(raw: Any) -> ServerError | None:
    """OpenRouter's `metadata.raw`: the upstream provider's body, as JSON text, an object, or plain text."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return ServerError(_flat(raw)) if raw.strip() else None
    if isinstance(raw, dict):
        return _read(raw)
    return None


def _violations(error: dict[str, Any]) -> Iterator[Any]:
    """Gemini's `google.rpc.BadRequest` details: each field violation's `field` path."""
    for detail in error.get("details") or ():
        if isinstance(detail, dict):
            for violation in detail.get("fieldViolations") or ():
                if isinstance(violation, dict):
                    yield violation.get("field")


def _locations(detail: Any) -> Iterator[str]:
    """FastAPI's validation errors (`detail[].loc`), as dotted paths without the leading `body`."""
    for item in detail if isinstance(detail, list) else ():
        loc = item.get("loc") if isinstance(item, dict) else None
        if isinstance(loc, list):
            yield ".".join(str(part) for part in loc if part != "body")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _strings(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(
        str(value) for value in values if isinstance(value, str | int) and not isinstance(value, bool) and str(value)
    )


def snake(name: str) -> str:
    """One spelling of a parameter's name: `reasoningEffort` and `reasoning-effort` are `reasoning_effort`."""
    return _CAMEL.sub("_", name).replace("-", "_").lower()


def judge(status: int | None, error: ServerError, carried: Iterable[str] | None = None) -> Verdict:
    """Whose fault a failed request is. `carried`: the run's settings the request carried (`ChatRequest` field
    names, `json_mode` when JSON mode was asked); they decide between options a field maps to."""
    if status is None or not 400 <= status < 500 or status in RETRYABLE_STATUSES:
        return Verdict(False, None)
    if prompt_at_fault(status, error):
        return Verdict(True, None)
    return Verdict(False, refusal_fix(status, error, carried))


def prompt_at_fault(status: int, error: ServerError) -> bool:
    """Whether the provider says this prompt is at fault: too long for the context, or its content blocked."""
    if status == TOO_LARGE or error.flagged:
        return True
    if any(code.lower().replace("_", "") in _PROMPT_CODES for code in error.codes):
        return True
    lowered = error.message.lower()
    return any(phrase in lowered for phrase in _PROMPT_PHRASES)


def refusal_fix(status: int, error: ServerError, carried: Iterable[str] | None = None) -> str | None:
    """The one-line fix of a refusal of the request's shape: the option mapping to the first field the server
    names (its structured fields first, then the words of its message); None for a refused client (401, 403, 404)
    whose message maps to no option, which stops the sweep on its own."""
    if status == METHOD_NOT_ALLOWED:
        return METHOD_FIX
    from edsb.llm.providers import refusal_fixes  # the providers' own phrases (OpenAI's, OpenRouter's)

    lowered = error.message.lower()
    for phrase, fix in refusal_fixes():
        if phrase in lowered:
            return fix
    kept = set(carried) if carried is not None else None
    for name in (*_field_names(error.fields), *_message_names(error.message)):
        options = _FIELD_OPTIONS.get(name)
        if options:
            chosen = next((option for option in options if kept is None or option in kept), options[0])
            return _OPTION_FIXES[chosen]
    if status in REFUSED_CLIENT_STATUSES:
        return None
    if error.fields:
        return f"the server refused the field {error.fields[0]!r}, which no option of edsb sets: nothing was scored"
    if status not in SHAPE_STATUSES:  # a 402 (no credits left), a 409 ...: not the request's shape, still no score
        return f"the server refuses this client's requests (HTTP {status}): nothing was scored; see its message"
    return SHAPE_FIX


def _field_names(paths: Iterable[str]) -> Iterator[str]:
    """Each path's segments, the most specific (last) first: `thinking.enabled.budget_tokens` is `budget_tokens`."""
    for path in paths:
        yield from (snake(part) for part in reversed(re.split(r"[.\[\]]+", path)) if part)


def _message_names(message: str) -> Iterator[str]:
    """The names a message may give a parameter, in its order: each word or dotted path (by its segments), and each
    pair of words as one (`Thinking level` is `thinking_level`)."""
    words = [match.group() for match in _WORD.finditer(message)]
    for index, word in enumerate(words):
        if index + 1 < len(words) and "." not in word:
            yield snake(f"{word}_{words[index + 1]}")
        yield from _field_names([word])
