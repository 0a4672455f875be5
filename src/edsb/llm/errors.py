"""Failures of the LLM layer, split by who can act on them.

User errors (a bad model spec, a missing key variable, a replay directory that lacks a request) are `EdsbError`s
with one-line messages. A `TransportError` is different in kind: the model gave no completion (retries exhausted, or
a request the server refused). The pipeline then leaves the run `incomplete`, to be asked again on resume; a prompt
the provider refuses for what it says (too long for the context, content blocked) is the model's `request_rejected`;
any other refusal (a setting, a field, a bad key, an unknown model) stops the sweep (`refusals.py` judges which).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from edsb.errors import EdsbError, UsageError
from edsb.llm.refusals import REFUSED_CLIENT_STATUSES, ServerError, judge
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


class TransportError(Exception):
    """The model gave no completion: timeouts, refused connections, HTTP errors, bodies that are not completions.

    `kind` says which, `status` carries the HTTP status for kind `http`, `attempts` how many requests were sent (0:
    refused before sending). A refused request is judged (`refusals.judge`) where the server's structured error and
    the request are known, and `prompt_fault` and `fix` given; else from the message's words here. `prompt_fault`:
    the provider says this prompt is at fault (too long, content blocked), the model's `request_rejected`; `fix`:
    the refusal is configuration, and this is what to change.
    """

    def __init__(
        self,
        kind: TransportKind,
        message: str,
        *,
        attempts: int,
        status: int | None = None,
        fix: str | None = None,
        prompt_fault: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: TransportKind = transport_kind(kind)
        self.message = message
        self.attempts = attempts
        self.status = status
        if prompt_fault is None and fix is None and self.kind == "http":
            prompt_fault, fix = judge(status, ServerError(message))
        self.prompt_fault = bool(prompt_fault)
        self.fix = fix

    @property
    def setting_refused(self) -> bool:
        """The request's shape is refused (a parameter, a value, a field, the address): configuration, the same for
        every run, so the sweep stops."""
        return self.fix is not None

    @property
    def request_rejected(self) -> bool:
        """The endpoint refused this one prompt (too long for the context, its content blocked): the model's
        execution error. A local model's overflow (`rejected` without a fix) is one too."""
        return self.prompt_fault or (self.kind == "rejected" and self.fix is None)

    @property
    def client_refused(self) -> bool:
        """A refused client (bad key, forbidden, unknown model or endpoint): no request of this run can succeed."""
        return self.kind == "http" and self.status in REFUSED_CLIENT_STATUSES and not self.prompt_fault

    def __str__(self) -> str:
        status = f" {self.status}" if self.status is not None else ""
        if self.attempts == 0:
            return f"{self.kind}{status} before sending: {self.message}"
        tries = "attempt" if self.attempts == 1 else "attempts"
        return f"{self.kind}{status} after {self.attempts} {tries}: {self.message}"
