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


class TransportError(Exception):
    """The model gave no completion: timeouts, refused connections, HTTP errors, bodies that are not completions.

    `kind` says which, `status` carries the HTTP status for kind `http`, `attempts` how many requests were sent.
    """

    def __init__(self, kind: TransportKind, message: str, *, attempts: int, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: TransportKind = transport_kind(kind)
        self.message = message
        self.attempts = attempts
        self.status = status

    @property
    def request_rejected(self) -> bool:
        return self.kind == "rejected" or (self.kind == "http" and self.status in REJECTED_REQUEST_STATUSES)

    @property
    def client_refused(self) -> bool:
        return self.kind == "http" and self.status in REFUSED_CLIENT_STATUSES

    def __str__(self) -> str:
        status = f" {self.status}" if self.status is not None else ""
        tries = "attempt" if self.attempts == 1 else "attempts"
        return f"{self.kind}{status} after {self.attempts} {tries}: {self.message}"
