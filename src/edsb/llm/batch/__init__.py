"""The providers' batch APIs behind one small protocol: submit requests, poll the batch, collect what came back.

A batch sells the same requests at half price and answers within a day. edsb sends each request exactly as the
synchronous client would (the client's own `_prepare` builds the body), names it by its `request_key` (the response
cache's key, so an answer lands where the next pass looks for it), and reads each answer with the client's own
`_parse`. What a batch could not answer comes back as a `BatchFailure`, judged as the synchronous client judges a
refusal (`refusals.judge`), so a refused prompt stays the model's `request_rejected`.

One module per API: `openai` (OpenAI's Batch API, also Azure's and the Responses API's), `anthropic` (Message
Batches), `gemini` (Gemini's batch mode). `batch_route(model)` picks the one that serves a model, or refuses with one
line before anything is sent.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from edsb.errors import UsageError
from edsb.llm.errors import TransportError
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse
from edsb.llm.refusals import judge, read_error
from edsb.llm.remote import DEFAULT_MAX_RESPONSE_BYTES
from edsb.llm.retry import is_retryable_status

if TYPE_CHECKING:
    from edsb.llm.batch.openai import OpenAIBatch

FIND_WITHIN = 1_000
MAX_LINE_BYTES = DEFAULT_MAX_RESPONSE_BYTES  # one answer of a batch's output file, bounded as a synchronous reply
BatchState = Literal["pending", "running", "ended"]
FailureKind = Literal["refused", "expired", "failed"]


class RequestDeferred(BaseException):
    """A run's request is not in the response cache and has been put in the pass's batch: the run waits for it.

    A BaseException, so that the pipeline, which records every `Exception` as an outcome, lets it through and the
    run is not recorded this pass."""


class BatchStatus(BaseModel):
    """A batch as the provider reports it: its state and its own counts."""

    model_config = ConfigDict(frozen=True)

    state: BatchState
    total: int = 0
    succeeded: int = 0
    failed: int = 0  # errored, expired or cancelled requests, as far as the provider has counted them
    provider_status: str = ""  # the provider's own word (`in_progress`, `JOB_STATE_RUNNING`)
    tag: str | None = None  # the tag the batch carries at the provider, where the API keeps one


class BatchFailure(BaseModel):
    """A request a batch did not answer. `refused`: the provider refused it (judged as a synchronous refusal);
    `expired`: the batch's window closed first; `failed`: the batch or the request failed for another reason."""

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    message: str
    status: int | None = None
    prompt_fault: bool = False
    fix: str | None = None

    @classmethod
    def of_status(cls, status: int, body: bytes) -> BatchFailure:
        """A request answered with an error status, its body in any provider's shape: a refusal (4xx) is judged as
        the synchronous client judges it; a rate limit or a server error failed, and is sent again."""
        error = read_error(body, status)
        if is_retryable_status(status):
            return cls(kind="failed", message=f"HTTP {status}: {error.message}", status=status)
        verdict = judge(status, error)
        return cls(
            kind="refused", message=error.message, status=status, prompt_fault=verdict.prompt_fault, fix=verdict.fix
        )

    @property
    def final(self) -> bool:
        """A refusal is the answer the synchronous endpoint gives too; sending it again changes nothing."""
        return self.kind == "refused"

    def to_error(self) -> TransportError:
        """The failure as the synchronous client would have raised it, for the pipeline to classify."""
        if self.kind == "refused":
            kind = "http" if self.status is not None else "rejected"
            return TransportError(
                kind, self.message, attempts=1, status=self.status, fix=self.fix, prompt_fault=self.prompt_fault
            )
        return TransportError("timeout", f"batch request {self.kind}: {self.message}", attempts=1)


Outcome = ChatResponse | BatchFailure
UNREADABLE = BatchFailure(kind="failed", message="the batch's output held no readable answer for this request")
TWICE = BatchFailure(kind="failed", message="the batch answered this request twice; neither answer is kept")


class LineSplitter:
    """The lines of a file fed in chunks, each held only up to `limit` bytes: a longer line comes out as None (so a
    huge or endless line in a provider's output costs no more memory than a synchronous reply may)."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._over = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            whole = not self._over and len(self._buffer) + len(piece) <= self.limit
            lines.append(bytes(self._buffer + piece) if whole else None)
            self._buffer.clear()
            self._over, start = False, end + 1
        rest = chunk[start:]
        if not self._over and len(self._buffer) + len(rest) > self.limit:
            self._over = True
            self._buffer.clear()
        if not self._over:
            self._buffer += rest
        return lines

    def end(self) -> list[bytes | None]:
        """The last line, if the file does not end with a newline."""
        last: list[bytes | None] = [None] if self._over else [bytes(self._buffer)] if self._buffer.strip() else []
        self._buffer.clear()
        self._over = False
        return last


NOT_OURS = BatchFailure(kind="failed", message="the batch's input for this request is not the line edsb sent")


def line_digest(line: bytes) -> str:
    """A request's input line (`BatchRoute.line`), as recorded with the batch's intent."""
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def json_entry(raw: bytes | None) -> dict[str, Any] | None:
    """One line of an output file as a JSON object; None for a line too long, torn, not UTF-8 or not an object."""
    if raw is None or not raw.strip():
        return None
    try:
        entry = json.loads(raw)
    except ValueError:  # torn JSON, or bytes that are not UTF-8
        return None
    return entry if isinstance(entry, dict) else None


def gathered(
    answers: Iterable[tuple[str, Outcome]], sent: Mapping[str, Any], missing: BatchFailure
) -> dict[str, Outcome]:
    """Every request's outcome, from a batch's `(custom id, outcome)` pairs. An id this batch did not ask for (another
    directory's, another model's, made up) is dropped, so no answer is ever stored under a key it does not belong to;
    an id answered twice gets neither answer (it is sent again); an id not answered gets `missing`."""
    outcomes: dict[str, Outcome] = {}
    for key, outcome in answers:
        if key in sent:
            outcomes[key] = TWICE if key in outcomes else outcome
    return {key: outcomes.get(key, missing) for key in sent}


class BatchRoute(Protocol):
    """One provider's batch API. `sent` is what a request sends (`ChatResponse.sent`), kept with the batch's intent
    so that a batch collected after a crash reads as the synchronous reply would."""

    name: str
    max_requests: int  # what one batch may hold: requests, and bytes of its input (`line` for each request)
    max_bytes: int

    def sent(self, request: ChatRequest) -> dict[str, Any]: ...

    def line(self, key: str, request: ChatRequest) -> bytes:
        """The request as one JSON line of the provider's batch input."""
        ...

    async def submit(self, requests: Mapping[str, ChatRequest], tag: str) -> str: ...

    async def find(self, tag: str) -> str | None:
        """The batch an earlier process created under `tag` but did not live to record, if the API can say (among
        the `FIND_WITHIN` newest batches: a search, not a walk through an account's whole history)."""
        ...

    async def poll(self, batch_id: str) -> BatchStatus: ...

    async def collect(
        self, batch_id: str, sent: Mapping[str, dict[str, Any]], digests: Mapping[str, str]
    ) -> dict[str, Outcome]:
        """Every request's outcome. `digests`: each request's input line as sent (`line_digest`); where the API
        returns the batch's input, an answer to a line that is not the one edsb sent is not kept."""
        ...

    async def aclose(self) -> None: ...


def export_route(model: ChatModel) -> OpenAIBatch:
    """OpenAI's batch format for a model behind an OpenAI-compatible chat API (`--batch-export`, `--batch-import`:
    files for a server's offline batch, such as vLLM's `run-batch`); a usage error for any other model."""
    from edsb.llm.openai_client import OpenAIChatModel

    inner = getattr(model, "inner", model)
    if not isinstance(inner, OpenAIChatModel):
        raise UsageError(
            "--batch-export and --batch-import write and read OpenAI's chat completions batch format: they need an "
            f"OpenAI-compatible model (openai:<model> --base-url URL), not {model.identity.split('@')[0]}"
        )
    from edsb.llm.batch.openai import OpenAIBatch

    return OpenAIBatch(inner)


# The batch APIs by the name a provider's row gives its route (`Provider.batch`): module and class.
_ROUTES = {
    "openai": ("edsb.llm.batch.openai", "OpenAIBatch"),
    "anthropic": ("edsb.llm.batch.anthropic", "AnthropicBatch"),
    "gemini": ("edsb.llm.batch.gemini", "GeminiBatch"),
}


def batch_route(model: ChatModel) -> BatchRoute:
    """The batch API that serves `model` (the client under a response cache), as its provider's row names it; a
    usage error where there is none."""
    from edsb.llm.providers import PROVIDERS

    inner = getattr(model, "inner", model)
    route = getattr(getattr(inner, "provider", None), "batch", None)
    if route is None:
        having = ", ".join(name for name, provider in PROVIDERS.items() if provider.batch)
        raise UsageError(
            f"--batch: {model.identity.split('@')[0]} has no batch API edsb can use ({having} have one); drop --batch"
        )
    module, name = _ROUTES[route]  # imported here: each route imports its SDK only when a batch run uses it
    found: BatchRoute = getattr(importlib.import_module(module), name)(inner)
    return found
