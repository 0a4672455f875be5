"""Failures of the LLM layer, split by who can act on them.

User errors (a bad model spec, a missing key variable, a replay directory that lacks a request) are `EdsbError`s
with one-line messages. A `TransportError` is different in kind: the model never answered (retries exhausted, a
broken connection, a body that is no completion), so the pipeline marks the run `incomplete` and the next pass
retries it; only a request the server rejected is the model's execution error, as in the reference, and a client
the endpoint refuses (bad key, unknown model) stops the sweep.
"""

from __future__ import annotations

from typing import Literal

from edsb.errors import EdsbError, UsageError

# `unreachable`: no connection could be opened (nothing listens, wrong host); `connection`: one broke after opening;
# `oversized`: the reply's body or head is over edsb's size limits.
TransportKind = Literal["timeout", "unreachable", "connection", "http", "oversized", "invalid_response", "rejected"]


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
        self.kind: TransportKind = kind
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
