"""A loopback fake of Anthropic's Message Batches, as the `anthropic` SDK's `messages.batches` calls it:

    with AnthropicBatchServer(handler) as server:   # handler(RecordedRequest) -> Reply, chat-shaped, as OpenAIServer's
        ... point the SDK (or `--base-url`) at server.root_url ...
        server.batches                              # the `requests` of each batch created

Each behaviour as the API reference describes it:
- `POST /v1/messages/batches` takes `requests`, each a `custom_id` and the `params` of `messages.create`, and answers
  with the batch, `in_progress` (https://docs.anthropic.com/en/api/creating-message-batches). Every request is
  answered at once by the handler, through the chat shape `OpenAIServer` uses for every protocol.
- `GET /v1/messages/batches/<id>` is the batch: `in_progress` on the first look, `ended` after (unless `held`), with
  its `request_counts` (`processing`, `succeeded`, `errored`, `canceled`, `expired`) and `results_url`
  (https://docs.anthropic.com/en/api/retrieving-message-batches).
- `GET <results_url>` streams the results as JSONL, one per request, `succeeded` with the message or `errored` with
  the error body, in no promised order (https://docs.anthropic.com/en/api/retrieving-message-batch-results): here
  in reverse, so a client that matched results by position would fail.
- `tamper(results) -> bytes`: the results file of each batch as served, rewritten (torn lines, ...).
- `results_faults`: the statuses the next downloads of a results file answer instead, one each, with the API's error
  body (https://docs.anthropic.com/en/api/errors): 401 `authentication_error`, 403 `permission_error`, ...
- `POST /v1/messages` (the synchronous API) answers only `probe`, check-model's request, counted in `sync_requests`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.loopback import JsonHandler, LoopbackServer
from tests.support.openai_server import ANTHROPIC_PATH, RecordedRequest, Reply, as_chat, in_dialect

Handler = Callable[[RecordedRequest], Reply]
_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}  # fmt: skip


class AnthropicBatchServer(LoopbackServer):
    def __init__(self, handler: Handler, *, probe: Reply | None = None) -> None:
        self.handler = handler
        self.probe = probe
        self.held = False
        self.tamper: Callable[[bytes], bytes] = lambda results: results
        self.results_faults: list[int] = []
        self.batches: dict[str, list[dict[str, Any]]] = {}
        self.sync_requests = 0
        self._results: dict[str, list[dict[str, Any]]] = {}
        self._polls: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        results = [self._result(entry) for entry in body["requests"]]
        with self._lock:
            batch_id = f"msgbatch_{next(self._ids):04d}"
            self.batches[batch_id] = body["requests"]
            self._results[batch_id] = results
            self._polls[batch_id] = 0
        return self._batch(batch_id, ended=False)

    def _result(self, entry: dict[str, Any]) -> dict[str, Any]:
        native = RecordedRequest("POST", ANTHROPIC_PATH, {}, json.dumps(entry["params"]).encode(), time.monotonic())
        reply = in_dialect(self.handler(as_chat(native, "anthropic")), "anthropic")
        payload = json.loads(reply.body)
        if reply.status == 200:
            return {"custom_id": entry["custom_id"], "result": {"type": "succeeded", "message": payload}}
        message = (payload.get("error") or {}).get("message", "scripted error")
        error = {"type": "error", "error": {"type": _ERROR_TYPES.get(reply.status, "api_error"), "message": message}}
        return {"custom_id": entry["custom_id"], "result": {"type": "errored", "error": error}}

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            self._polls[batch_id] += 1
            ended = self._polls[batch_id] > 1 and not self.held
        return self._batch(batch_id, ended)

    def _batch(self, batch_id: str, ended: bool) -> dict[str, Any]:
        results = self._results[batch_id]
        kinds = [result["result"]["type"] for result in results]
        counts = {"processing": 0 if ended else len(kinds), "canceled": 0, "expired": 0,
                  "succeeded": kinds.count("succeeded") if ended else 0,
                  "errored": kinds.count("errored") if ended else 0}  # fmt: skip
        now = "2026-01-01T00:00:00Z"
        return {
            "id": batch_id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts, "created_at": now, "expires_at": "2026-01-02T00:00:00Z",
            "ended_at": now if ended else None, "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"{self.root_url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }  # fmt: skip

    def results(self, batch_id: str) -> bytes:
        lines = (json.dumps(result).encode() + b"\n" for result in reversed(self._results[batch_id]))
        return self.tamper(b"".join(lines))


class _BatchHandler(JsonHandler):
    server_owner: AnthropicBatchServer

    def do_POST(self) -> None:
        body, owner = self._body(), self.server_owner
        if self.path == "/v1/messages/batches":
            self._send(json.dumps(owner.create(json.loads(body))).encode())
        elif self.path == ANTHROPIC_PATH and owner.probe is not None:
            owner.sync_requests += 1
            reply = in_dialect(owner.probe, "anthropic")
            self._send(reply.body, reply.status)
        else:
            self._send(json.dumps({"type": "error", "error": {"type": "not_found_error"}}).encode(), 404)

    def do_GET(self) -> None:
        owner, path = self.server_owner, self.path.partition("?")[0]
        if path.endswith("/results") and owner.results_faults:
            status = owner.results_faults.pop(0)
            error = {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": "refused"}}
            self._send(json.dumps(error).encode(), status)
        elif path.endswith("/results"):
            batch_id = path.removeprefix("/v1/messages/batches/").removesuffix("/results")
            self._send(owner.results(batch_id), 200, "application/x-jsonl")
        elif path.startswith("/v1/messages/batches/"):
            self._send(json.dumps(owner.retrieve(path.removeprefix("/v1/messages/batches/"))).encode())
        else:
            self._send(b"{}", 404)


AnthropicBatchServer.handler_class = _BatchHandler
