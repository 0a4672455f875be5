"""OpenAI's Batch API (https://platform.openai.com/docs/api-reference/batch) through the `openai` SDK, for the chat
completions client (OpenAI, and Azure OpenAI's deployments, which serve the same API:
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/batch) and the Responses client.

A batch is a JSONL file uploaded with purpose `batch`, one request a line (`custom_id`, `method`, `url`, `body`), then
a batch over it with a 24-hour window. It ends `completed`, `expired`, `failed` or `cancelled`; the answers are in its
output file and the requests it could not answer in its error file, both JSONL keyed by `custom_id`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic_core import to_json

from edsb.llm.batch import (
    FIND_WITHIN,
    NOT_OURS,
    UNREADABLE,
    BatchFailure,
    BatchStatus,
    LineSplitter,
    Outcome,
    gathered,
    json_entry,
    line_digest,
)
from edsb.llm.errors import ProviderSdkError
from edsb.llm.protocol import ChatRequest
from edsb.llm.retry import AttemptFailure

WINDOW = "24h"
TAG_FIELD = "edsb_batch"  # the batch's metadata entry naming the intent it carries
_ENDED = {"completed", "expired", "failed", "cancelled"}
_PENDING = {"validating"}


class OpenAIBatch:
    """The Batch API of the endpoint a chat completions or Responses client speaks to."""

    # A batch's input file holds up to 50,000 requests and 200 MB
    # (https://platform.openai.com/docs/guides/batch#rate-limits); a little room is kept under the bytes.
    max_requests = 50_000
    max_bytes = 190_000_000

    def __init__(self, model: Any) -> None:
        self.model = model
        self.responses = model.provider.api == "responses"
        self.azure = model.provider.name == "azure"
        self.name = model.provider.name
        chat = "/chat/completions" if self.azure else "/v1/chat/completions"  # Azure's path has no version
        self.url = "/v1/responses" if self.responses else chat
        self._client: Any = None

    def _sdk_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError:
                needs = "--batch: OpenAI's Batch API needs the SDK: pip install 'edsb[openai]'"
                raise ProviderSdkError(needs) from None
            key = self.model._api_key
            if self.azure:
                self._client = openai.AsyncAzureOpenAI(
                    azure_endpoint=self.model.base_url, api_key=key, api_version=self.model.api_version()
                )
            else:
                self._client = openai.AsyncOpenAI(api_key=key, base_url=self.model.base_url)
        return self._client

    def _body(self, request: ChatRequest) -> tuple[bytes, dict[str, Any]]:
        """The body the synchronous client sends, byte for byte, and what it records as sent."""
        prepared, sent = self.model._prepare(request)
        return (prepared if isinstance(prepared, bytes) else to_json(prepared)), sent

    def sent(self, request: ChatRequest) -> dict[str, Any]:
        return self._body(request)[1]

    def line(self, key: str, request: ChatRequest) -> bytes:
        head = to_json({"custom_id": key, "method": "POST", "url": self.url})
        return head[:-1] + b',"body":' + self._body(request)[0] + b"}\n"

    async def submit(self, requests: Mapping[str, ChatRequest], tag: str) -> str:
        client = self._sdk_client()
        data = b"".join(self.line(key, request) for key, request in requests.items())
        uploaded = await client.files.create(file=(f"edsb-{tag}.jsonl", data), purpose="batch")
        batch = await client.batches.create(
            input_file_id=uploaded.id, endpoint=self.url, completion_window=WINDOW, metadata={TAG_FIELD: tag}
        )
        return str(batch.id)

    async def find(self, tag: str) -> str | None:
        seen = 0
        async for batch in self._sdk_client().batches.list(limit=100):  # newest first
            if (batch.metadata or {}).get(TAG_FIELD) == tag:
                return str(batch.id)
            seen += 1
            if seen >= FIND_WITHIN:
                break
        return None

    async def poll(self, batch_id: str) -> BatchStatus:
        batch = await self._sdk_client().batches.retrieve(batch_id)
        counts = batch.request_counts
        return BatchStatus(
            state="ended" if batch.status in _ENDED else "pending" if batch.status in _PENDING else "running",
            total=getattr(counts, "total", 0) or 0,
            succeeded=getattr(counts, "completed", 0) or 0,
            failed=getattr(counts, "failed", 0) or 0,
            provider_status=str(batch.status),
            tag=_tag(batch),
        )

    async def collect(
        self, batch_id: str, sent: Mapping[str, dict[str, Any]], digests: Mapping[str, str]
    ) -> dict[str, Outcome]:
        """Every request's answer or failure: the output file, the error file, and for requests in neither the
        batch's own end (a failed batch's errors, expiry, cancellation). An answer whose line in the batch's input
        file is not the one edsb sent (the id matches, the request does not) is not kept."""
        client = self._sdk_client()
        batch = await client.batches.retrieve(batch_id)
        ours = await self._ours(batch.input_file_id, digests) if digests else set(sent)
        answers: list[tuple[str, Outcome]] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                async for lines in self._lines(file_id):
                    answers += self.answers(lines, sent)
        kept = [(key, outcome if key in ours else NOT_OURS) for key, outcome in answers]
        return gathered(kept, sent, _batch_failure(batch))

    async def _lines(self, file_id: str) -> AsyncIterator[list[bytes | None]]:
        """A file's lines, streamed, each bounded (`LineSplitter`)."""
        async with self._sdk_client().files.with_streaming_response.content(file_id) as content:
            lines = LineSplitter()
            async for chunk in content.iter_bytes():
                yield lines.feed(chunk)
            yield lines.end()

    async def _ours(self, input_file_id: str | None, digests: Mapping[str, str]) -> set[str]:
        """The ids whose line in the batch's input file is, byte for byte, the line edsb sent. A server that will not
        give the input back (a 4xx) leaves the batch's tag, checked at each poll, as the only proof: all are ours."""
        ours: set[str] = set()
        if not input_file_id:
            return ours
        try:
            async for lines in self._lines(input_file_id):
                for raw in lines:
                    key = (json_entry(raw) or {}).get("custom_id")
                    if raw is not None and isinstance(key, str) and digests.get(key) == line_digest(raw):
                        ours.add(key)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500 and status != 429:
                return set(digests)
            raise
        return ours

    def answers(self, lines: list[bytes | None], sent: Mapping[str, dict[str, Any]]) -> list[tuple[str, Outcome]]:
        """The lines of an output or error file read as (custom id, outcome); a line that cannot be read is left out,
        so its request counts as unanswered."""
        found = []
        for entry in map(json_entry, lines):
            key = entry.get("custom_id") if entry is not None else None
            if isinstance(entry, dict) and isinstance(key, str) and key in sent:
                found.append((key, self.read(entry, sent[key])))
        return found

    def read(self, entry: dict[str, Any], sent: dict[str, Any]) -> Outcome:
        """One line of an output or error file (OpenAI's, or vLLM's `run-batch` output) as an answer or failure."""
        response, error = _object(entry.get("response")), _object(entry.get("error"))
        status, body = response.get("status_code"), response.get("body")
        if status == 200 and isinstance(body, dict):
            try:
                return self._parse(body, sent)
            except AttemptFailure as exc:
                return BatchFailure(kind="failed", message=exc.message)
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            return BatchFailure.of_status(status, json.dumps(body).encode() if body is not None else b"")
        if isinstance(status, int):  # a success without an answer's body: unreadable, not the model's refusal
            return UNREADABLE
        code, message = str(error.get("code") or ""), str(error.get("message") or "no answer")
        return BatchFailure(kind="expired" if code == "batch_expired" else "failed", message=message)

    def _parse(self, body: dict[str, Any], sent: dict[str, Any]) -> Any:
        if self.responses:  # read into the SDK's type as the SDK reads a synchronous reply: leniently
            from openai._models import construct_type
            from openai.types.responses import Response

            return self.model._parse(construct_type(type_=Response, value=body), 0.0, 1, (None, sent))
        return self.model._parse(to_json(body), 0.0, 1, (b"", sent))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _tag(batch: Any) -> str | None:
    """The edsb tag in a batch's metadata; None where the server keeps no metadata (nothing to compare)."""
    metadata = batch.metadata if isinstance(getattr(batch, "metadata", None), dict) else {}
    tag = metadata.get(TAG_FIELD)
    return str(tag) if tag is not None else None if not metadata else ""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _batch_failure(batch: Any) -> BatchFailure:
    """What a request in neither file came to: the batch's window closed, it failed validation, or it was cancelled."""
    if batch.status == "expired":
        return BatchFailure(kind="expired", message=f"the batch expired after its {WINDOW} window")
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    said = "; ".join(str(getattr(error, "message", "") or "") for error in errors if getattr(error, "message", None))
    return BatchFailure(kind="failed", message=f"the batch ended {batch.status}" + (f": {said}" if said else ""))
