"""Anthropic's Message Batches (https://docs.anthropic.com/en/api/creating-message-batches) through the `anthropic`
SDK's `messages.batches`.

A batch is a list of requests, each a `custom_id` and the very `params` of `messages.create`; it is `in_progress`,
then `ended` (within 24 hours), and its results are JSONL, one per request: `succeeded` with the message,
`errored` with the error, `canceled` or `expired`. Prompt-cache reads and writes count inside a batch as outside
(https://docs.anthropic.com/en/docs/build-with-claude/batch-processing); since a batch may take longer than the
cache's five minutes, the shared prefix is marked with the one-hour TTL here (`"ttl": "1h"`,
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): the tokens the model sees are the same, so the
request's cache key is too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic_core import to_json

from edsb.llm.batch import UNREADABLE, BatchFailure, BatchStatus, LineSplitter, Outcome, gathered, json_entry
from edsb.llm.errors import ProviderSdkError
from edsb.llm.protocol import ChatRequest
from edsb.llm.retry import AttemptFailure

CACHE_TTL = "1h"
# The error types of Anthropic's error bodies, as the HTTP status the synchronous API sends with each
# (https://docs.anthropic.com/en/api/errors).
_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatch:
    """Message Batches of the endpoint the Anthropic client speaks to."""

    name = "anthropic"
    # A batch holds up to 100,000 requests and 256 MB (https://docs.anthropic.com/en/docs/build-with-claude/
    # batch-processing#batch-limitations); a little room is kept under the bytes.
    max_requests = 100_000
    max_bytes = 240_000_000

    def __init__(self, model: Any) -> None:
        self.model = model
        self._client: Any = None

    def _sdk_client(self) -> Any:
        if self._client is None:
            try:
                import anthropic
            except ImportError:
                needs = "--batch: Anthropic's Message Batches need the SDK: pip install 'edsb[anthropic]'"
                raise ProviderSdkError(needs) from None
            self._client = anthropic.AsyncAnthropic(api_key=self.model._api_key, base_url=self.model.base_url)
        return self._client

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The synchronous client's `messages.create` arguments, the cache marks given the one-hour TTL."""
        return with_ttl(self.model.params(request))

    def sent(self, request: ChatRequest) -> dict[str, Any]:
        sent = dict(self.model._prepare(request)[1])
        if "cache_control" in sent:
            sent["cache_ttl"] = CACHE_TTL
        return sent

    def line(self, key: str, request: ChatRequest) -> bytes:
        return to_json({"custom_id": key, "params": self.params(request)}) + b"\n"

    async def submit(self, requests: Mapping[str, ChatRequest], tag: str) -> str:
        entries = [{"custom_id": key, "params": self.params(request)} for key, request in requests.items()]
        batch = await self._sdk_client().messages.batches.create(requests=entries)
        return str(batch.id)

    async def find(self, tag: str) -> str | None:
        return None  # a message batch carries no label of ours to find it by

    async def poll(self, batch_id: str) -> BatchStatus:
        batch = await self._sdk_client().messages.batches.retrieve(batch_id)
        counts = batch.request_counts
        failed = counts.errored + counts.canceled + counts.expired
        return BatchStatus(
            state="ended" if batch.processing_status == "ended" else "running",
            total=counts.processing + counts.succeeded + failed,
            succeeded=counts.succeeded,
            failed=failed,
            provider_status=str(batch.processing_status),
        )

    async def collect(
        self, batch_id: str, sent: Mapping[str, dict[str, Any]], digests: Mapping[str, str]
    ) -> dict[str, Outcome]:
        # `digests` unused: the API does not give a batch's requests back to compare.
        answers: list[tuple[str, Outcome]] = []
        async for lines in self._results(batch_id):
            for entry in map(json_entry, lines):
                key = entry.get("custom_id") if entry is not None else None
                if entry is not None and isinstance(key, str) and key in sent:
                    answers.append((key, self._read(entry, sent[key])))
        missing = BatchFailure(kind="failed", message="the batch ended without a result for this request")
        return gathered(answers, sent, missing)

    async def _results(self, batch_id: str) -> AsyncIterator[list[bytes | None]]:
        """The results file's lines, streamed and each bounded (`LineSplitter`): where the SDK's own reader would
        stop at a torn line, or hold a line of any length. The SDK's streaming response gives the raw bytes, and
        raises its own error for a refusal."""
        results = self._sdk_client().messages.batches.with_streaming_response.results
        async with results(batch_id) as response:
            lines = LineSplitter()
            async for chunk in response.iter_bytes():
                yield lines.feed(chunk)
            yield lines.end()

    def _read(self, entry: dict[str, Any], sent: dict[str, Any]) -> Outcome:
        """One result line, read into the SDK's type as the SDK reads it (leniently); a line of the wrong shape is an
        answer edsb cannot read, asked again."""
        from anthropic.types.messages import MessageBatchIndividualResponse

        try:  # the SDK's models construct their nested types too, without refusing a value they do not know
            read: Any = MessageBatchIndividualResponse.model_construct(result=entry.get("result"))
            return self._outcome(read.result, sent)
        except (AttributeError, TypeError, ValueError, KeyError):
            return UNREADABLE

    def _outcome(self, result: Any, sent: dict[str, Any]) -> Outcome:
        if result.type == "succeeded":
            try:
                return self.model._parse(result.message, 0.0, 1, (None, sent))
            except AttemptFailure as exc:
                return BatchFailure(kind="failed", message=exc.message)
        if result.type == "errored":
            error = getattr(result.error, "error", result.error)
            body = {"type": "error", "error": {"type": error.type, "message": error.message}}
            return BatchFailure.of_status(_STATUS.get(error.type, 500), json.dumps(body).encode())
        if result.type == "expired":
            return BatchFailure(kind="expired", message="the batch ended before this request was answered")
        return BatchFailure(kind="failed", message=f"the request was {result.type}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def with_ttl(params: dict[str, Any]) -> dict[str, Any]:
    """`params` with every cache mark given the one-hour TTL (new dicts: the client's marks are shared)."""

    def marked(blocks: Any) -> Any:
        if not isinstance(blocks, list):
            return blocks
        return [
            {**block, "cache_control": {**block["cache_control"], "ttl": CACHE_TTL}}
            if isinstance(block, dict) and "cache_control" in block
            else block
            for block in blocks
        ]

    params = {**params, "system": marked(params["system"])} if "system" in params else dict(params)
    params["messages"] = [{**turn, "content": marked(turn["content"])} for turn in params["messages"]]
    return params
