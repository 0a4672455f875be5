"""Failures of the LLM layer, split by who can act on them.

User errors (a bad model spec, a missing key variable, a replay directory that lacks a request) are `EdsbError`s
with one-line messages. A `TransportError` is different in kind: the model gave no completion (retries exhausted, or
a request the server refused). The pipeline then leaves the run `incomplete`, to be asked again on resume; a request
refused for what it says (too long for the context) is the model's `request_rejected`; a refused client (a bad key,
an unknown model) stops the sweep.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from edsb.errors import EdsbError, UsageError
from edsb.results.kinds import ErrorKind

# The transport kinds are the `transport_*` error kinds without their prefix (`ErrorKind.transport` adds it back):
# `unreachable`: no connection could be opened (nothing listens, wrong host); `connection`: one broke after opening;
# `oversized`: the reply's body or head is over edsb's size limits.
_PREFIX = ErrorKind.transport("timeout").value.removesuffix("timeout")
TRANSPORT_KINDS = frozenset(kind.value.removeprefix(_PREFIX) for kind in ErrorKind if kind.value.startswith(_PREFIX))


def transport_kind(kind: str) -> str:
    """`kind` if it names a transport kind; ValueError otherwise (a fault of edsb's own)."""
    if kind not in TRANSPORT_KINDS:
        raise ValueError(f"{kind!r} is not a transport kind ({', '.join(sorted(TRANSPORT_KINDS))})")
    return kind


TransportKind = Annotated[str, AfterValidator(transport_kind)]


class ModelSpecError(UsageError):
    """A `--model` value that names no known kind of model."""


class ApiKeyError(UsageError):
    """The environment variable that should hold the API key is not set."""


class LocalModelError(EdsbError):
    """The embedded model cannot be loaded (extra `local` not installed, model file missing)."""


class ProviderSdkError(EdsbError):
    """A provider's SDK (an optional extra) is not installed."""


class ReplayError(EdsbError):
    """A replay directory without usable transcripts, or a request that was never recorded."""


# HTTP statuses that refuse the request itself (too long for the context, invalid for this model): asking again
# cannot help, so the model's answer is as good as an execution error.
REJECTED_REQUEST_STATUSES = frozenset({400, 413, 422})
# Statuses that refuse the client (bad key, forbidden, unknown model or endpoint): no request of this run can succeed.
REFUSED_CLIENT_STATUSES = frozenset({401, 403, 404})
# Statuses whose message may refuse a setting of the request (a parameter, or a value of one): the same for every run.
SETTING_STATUSES = frozenset({400, 422})
# A refusal of one prompt for its length: the model's `request_rejected`, as in the reference, whatever it names.
_TOO_LONG = ("context", "prompt is too long", "input is too long", "too many tokens", "too many input tokens")
# The settings a server may name when it refuses one, each with the fix (the option that changes it), as a word of
# the message: the API's own names, in the OpenAI, Anthropic and Gemini (REST and SDK) spellings.
_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("temperature",), "the model takes no temperature but its default: pass --temperature default"),
    (("top_p", "topP"), "the model takes no top_p: leave it unset"),
    (
        ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens"),
        "the model refuses this token cap or its name: change or drop --max-tokens",
    ),
    (("reasoning_effort", "effort"), "the model refuses this reasoning effort: change or drop --reasoning-effort"),
    (("thinking_level", "thinkingLevel"), "the model refuses this thinking level: change or drop --thinking-level"),
    (
        ("budget_tokens", "thinking_budget", "thinkingBudget", "thinking"),
        "the model refuses this thinking budget: change or drop --thinking-budget",
    ),
    (
        ("response_format", "json_object", "response_mime_type", "responseMimeType", "JSON mode"),
        "the server has no JSON mode: pass --no-json-mode",
    ),
    (("seed",), "the model takes no seed: drop --model-seed"),
)
METHOD_NOT_ALLOWED = 405
_METHOD_FIX = "check that --base-url ends in /v1; a server without JSON mode: pass --no-json-mode"


def setting_fix(status: int | None, message: str) -> str | None:
    """The one-line fix when a server refused a setting of the request (a parameter, or a value of one), which is
    configuration: every run would be refused alike. None for anything else, a prompt too long for the context
    included. The setting is the first one the message names."""
    if status == METHOD_NOT_ALLOWED:
        return _METHOD_FIX
    lowered = message.lower()
    if status not in SETTING_STATUSES or any(phrase in lowered for phrase in _TOO_LONG):
        return None
    named = [(at, fix) for names, fix in _FIXES for name in names if (at := _word_at(lowered, name.lower())) >= 0]
    return min(named)[1] if named else None


def _word_at(text: str, word: str) -> int:
    """Where `word` first stands as a word of `text` (not inside a longer name such as `reasoning_effort`), or -1."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return start
        start = text.find(word, start + 1)
    return -1


class TransportError(Exception):
    """The model gave no completion: timeouts, refused connections, HTTP errors, bodies that are not completions.

    `kind` says which, `status` carries the HTTP status for kind `http`, `attempts` how many requests were sent (0:
    refused before sending). `fix` names the option that fixes a refused setting (`setting_fix` of the server's
    message, unless given).
    """

    def __init__(
        self,
        kind: TransportKind,
        message: str,
        *,
        attempts: int,
        status: int | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: TransportKind = transport_kind(kind)
        self.message = message
        self.attempts = attempts
        self.status = status
        self.fix = fix if fix is not None else setting_fix(status, message) if self.kind == "http" else None

    @property
    def setting_refused(self) -> bool:
        """A parameter or a value the endpoint refuses: configuration, the same for every run, so the sweep stops."""
        return self.fix is not None

    @property
    def request_rejected(self) -> bool:
        """The endpoint refused this one request (too long for the context): the model's execution error."""
        if self.setting_refused:
            return False
        return self.kind == "rejected" or (self.kind == "http" and self.status in REJECTED_REQUEST_STATUSES)

    @property
    def client_refused(self) -> bool:
        return self.kind == "http" and self.status in REFUSED_CLIENT_STATUSES

    def __str__(self) -> str:
        status = f" {self.status}" if self.status is not None else ""
        if self.attempts == 0:
            return f"{self.kind}{status} before sending: {self.message}"
        tries = "attempt" if self.attempts == 1 else "attempts"
        return f"{self.kind}{status} after {self.attempts} {tries}: {self.message}"
