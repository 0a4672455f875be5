"""Gemini's batch mode (https://ai.google.dev/gemini-api/docs/batch-mode) through google-genai's `batches`.

A batch job holds inline requests (each the model, the contents and the generation config of `generate_content`,
with metadata of our own: the request's cache key) under a display name; its state goes from
`JOB_STATE_PENDING` through `JOB_STATE_RUNNING` to `JOB_STATE_SUCCEEDED`, `_FAILED`, `_CANCELLED` or `_EXPIRED`
(https://ai.google.dev/api/batch-mode), and its inline responses, in the order of the requests, each hold a
response or an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json

from edsb.llm.batch import FIND_WITHIN, BatchFailure, BatchStatus, Outcome, gathered
from edsb.llm.protocol import ChatRequest
from edsb.llm.retry import AttemptFailure

KEY_FIELD = "edsb_key"
CONTROL_TIMEOUT_S = 120.0  # one call of the batch API (create, get): never a wait for the answers
_ENDED = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
          "JOB_STATE_PARTIALLY_SUCCEEDED"}  # fmt: skip
_PENDING = {"JOB_STATE_PENDING", "JOB_STATE_QUEUED", "JOB_STATE_UNSPECIFIED"}
# A failed request's error is a google.rpc.Status, its code a gRPC code: the HTTP status the synchronous API answers
# with for each (https://cloud.google.com/apis/design/errors#handling_errors).
_HTTP_OF_RPC = {3: 400, 4: 504, 5: 404, 7: 403, 8: 429, 9: 400, 11: 400, 13: 500, 14: 503, 16: 401}


class GeminiBatch:
    """Batch mode of the Gemini API the Google client speaks to."""

    name = "google"
    # Inline requests may total 20 MB per batch (https://ai.google.dev/gemini-api/docs/batch-mode); a larger pass
    # goes in several batches. A little room is kept for the request's envelope.
    max_requests = 100_000
    max_bytes = 18_000_000

    def __init__(self, model: Any) -> None:
        self.model = model
        self._client: Any = None
        self._http: Any = None

    def _sdk_client(self) -> Any:
        """The synchronous client's own (its address, key and API version) over an httpx2 client of ours."""
        if self._client is None:
            import httpx2

            self._http = httpx2.AsyncClient(timeout=CONTROL_TIMEOUT_S)
            self._client = self.model._make_client(self._http)
        return self._client

    def inlined(self, key: str, request: ChatRequest) -> Any:
        """The request as the synchronous client's chat sends it: the history, then the last user turn."""
        types = self.model._sdk().types
        arguments, last = self.model.chat_arguments(request)
        contents = [*arguments["history"], types.Content(role="user", parts=[types.Part(text=last)])]
        return types.InlinedRequest(
            model=self.model.model, contents=contents, config=arguments["config"], metadata={KEY_FIELD: key}
        )

    def sent(self, request: ChatRequest) -> dict[str, Any]:
        return dict(self.model._prepare(request)[1])

    def line(self, key: str, request: ChatRequest) -> bytes:
        return to_json(self.inlined(key, request).model_dump(mode="json", exclude_none=True)) + b"\n"

    async def submit(self, requests: Mapping[str, ChatRequest], tag: str) -> str:
        source = [self.inlined(key, request) for key, request in requests.items()]
        job = await self._sdk_client().aio.batches.create(
            model=self.model.model, src=source, config={"display_name": f"edsb-{tag}"}
        )
        return str(job.name)

    async def find(self, tag: str) -> str | None:
        seen = 0
        async for job in await self._sdk_client().aio.batches.list():
            if job.display_name == f"edsb-{tag}":
                return str(job.name)
            seen += 1
            if seen >= FIND_WITHIN:
                break
        return None

    async def poll(self, batch_id: str) -> BatchStatus:
        job = await self._sdk_client().aio.batches.get(name=batch_id)
        state = str(getattr(job.state, "value", job.state))
        stats = job.completion_stats
        succeeded = (stats.successful_count or 0) if stats else 0
        failed = (stats.failed_count or 0) if stats else 0
        return BatchStatus(
            state="ended" if state in _ENDED else "pending" if state in _PENDING else "running",
            total=succeeded + failed + ((stats.incomplete_count or 0) if stats else 0),
            succeeded=succeeded,
            failed=failed,
            provider_status=state,
            tag=job.display_name.removeprefix("edsb-") if job.display_name else None,
        )

    async def collect(
        self, batch_id: str, sent: Mapping[str, dict[str, Any]], digests: Mapping[str, str]
    ) -> dict[str, Outcome]:
        # `digests` unused: the API does not give a batch's requests back to compare.
        job = await self._sdk_client().aio.batches.get(name=batch_id)
        state = str(getattr(job.state, "value", job.state))
        answers = (job.dest.inlined_responses if job.dest else None) or []
        keyed = [((answer.metadata or {}).get(KEY_FIELD, key), answer)  # in the order of the requests
                 for key, answer in zip(sent, answers, strict=False)]  # fmt: skip
        outcomes = [(key, self._outcome(answer, sent[key])) for key, answer in keyed if key in sent]
        said = f": {job.error.message}" if job.error is not None and job.error.message else ""
        missing = BatchFailure(kind="failed", message=f"the batch ended {state}{said}")
        if state == "JOB_STATE_EXPIRED":
            missing = BatchFailure(kind="expired", message=f"the batch ended {state}")
        return gathered(outcomes, sent, missing)

    def _outcome(self, answer: Any, sent: dict[str, Any]) -> Outcome:
        if answer.response is not None:
            try:
                return self.model._parse(answer.response, 0.0, 1, (None, sent))
            except AttemptFailure as exc:
                return BatchFailure(kind="failed", message=exc.message)
        error = answer.error
        status = _HTTP_OF_RPC.get(int(getattr(error, "code", None) or 13), 500)
        body = {"error": {"code": status, "message": getattr(error, "message", None) or "no answer"}}
        return BatchFailure.of_status(status, json.dumps(body).encode())

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        self._client = self._http = None
