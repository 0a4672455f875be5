"""A loopback fake of Gemini's batch mode with inline requests, as google-genai's `batches` calls it on the Gemini
API (https://ai.google.dev/api/batch-mode):

    with GeminiBatchServer(handler) as server:      # handler(RecordedRequest) -> Reply, chat-shaped, as OpenAIServer's
        ... point google-genai (or `--base-url`) at server.root_url ...
        server.batches                              # the inline requests of each batch created

- `POST /v1beta/models/<model>:batchGenerateContent` takes `batch.displayName` and
  `batch.inputConfig.requests.requests`, each a `request` (a `generateContent` body with its `model`) and our
  `metadata`, and answers with the batch as a long-running operation: its `name` (`batches/<id>`) and its
  `metadata` (`displayName`, `state` `BATCH_STATE_PENDING`). Every request is answered at once by the handler,
  through the chat shape `OpenAIServer` uses for every protocol.
- `GET /v1beta/batches/<id>` is the same operation: `BATCH_STATE_RUNNING` on the first look, `BATCH_STATE_SUCCEEDED`
  after, with `metadata.output.inlinedResponses.inlinedResponses`, in the order of the requests, each a `response`
  or an `error` (a google.rpc.Status) with the request's `metadata`.
- `POST /v1beta/models/<model>:generateContent` (the synchronous API) answers only `probe`, check-model's request,
  counted in `sync_requests`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.loopback import JsonHandler, LoopbackServer
from tests.support.openai_server import RecordedRequest, Reply, as_chat, in_dialect

Handler = Callable[[RecordedRequest], Reply]
# The API version as the client names it (google-genai's default, or `v1`).
_CREATE = re.compile(r"/v1(?:beta)?/models/(?P<model>[^/:]+):batchGenerateContent")
_SYNC = re.compile(r"/v1(?:beta)?/models/(?P<model>[^/:]+):generateContent")
_GET = re.compile(r"/v1(?:beta)?/(?P<name>batches/[^/:]+)")


class GeminiBatchServer(LoopbackServer):
    def __init__(self, handler: Handler, *, probe: Reply | None = None) -> None:
        self.handler = handler
        self.probe = probe
        self.batches: dict[str, list[dict[str, Any]]] = {}
        self.sync_requests = 0
        self._jobs: dict[str, dict[str, Any]] = {}
        self._polls: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def create(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        entries = body["batch"]["inputConfig"]["requests"]["requests"]
        answers = [self._answer(model, entry) for entry in entries]
        with self._lock:
            name = f"batches/{next(self._ids)}"
            self.batches[name] = entries
            self._polls[name] = 0
            self._jobs[name] = {"displayName": body["batch"].get("displayName"), "model": f"models/{model}",
                                "answers": answers}  # fmt: skip
        return self._operation(name, "BATCH_STATE_PENDING")

    def _answer(self, model: str, entry: dict[str, Any]) -> dict[str, Any]:
        path = f"/v1beta/models/{model}:generateContent"
        request = {key: value for key, value in entry["request"].items() if key != "model"}
        native = RecordedRequest("POST", path, {}, json.dumps(request).encode(), time.monotonic())
        reply = in_dialect(self.handler(as_chat(native, "google")), "google")
        payload = json.loads(reply.body)
        if reply.status == 200:
            return {"response": payload, "metadata": entry.get("metadata")}
        return {"error": {"code": 3, "message": str(payload)}, "metadata": entry.get("metadata")}

    def get(self, name: str) -> dict[str, Any]:
        with self._lock:
            self._polls[name] += 1
            done = self._polls[name] > 1
        return self._operation(name, "BATCH_STATE_SUCCEEDED" if done else "BATCH_STATE_RUNNING")

    def _operation(self, name: str, state: str) -> dict[str, Any]:
        job = self._jobs[name]
        metadata: dict[str, Any] = {"name": name, "displayName": job["displayName"], "model": job["model"],
                                    "state": state}  # fmt: skip
        if state == "BATCH_STATE_SUCCEEDED":
            metadata["output"] = {"inlinedResponses": {"inlinedResponses": job["answers"]}}
        return {"name": name, "metadata": metadata, "done": state == "BATCH_STATE_SUCCEEDED"}


class _BatchHandler(JsonHandler):
    server_owner: GeminiBatchServer

    def do_POST(self) -> None:
        body, owner, path = self._body(), self.server_owner, self.path.partition("?")[0]
        if match := _CREATE.fullmatch(path):
            self._send(json.dumps(owner.create(match["model"], json.loads(body))).encode())
        elif _SYNC.fullmatch(path) and owner.probe is not None:
            owner.sync_requests += 1
            reply = in_dialect(owner.probe, "google")
            self._send(reply.body, reply.status)
        else:
            missing = {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}}
            self._send(json.dumps(missing).encode(), 404)

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if match := _GET.fullmatch(path):
            self._send(json.dumps(self.server_owner.get(match["name"])).encode())
        else:
            self._send(b"{}", 404)


GeminiBatchServer.handler_class = _BatchHandler
