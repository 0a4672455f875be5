"""A loopback fake of OpenAI's Batch API (https://platform.openai.com/docs/api-reference/batch), as the `openai` SDK
and Inspect's batcher call it:

    with OpenAIBatchServer(handler) as server:      # handler(RecordedRequest) -> Reply, as OpenAIServer's
        ... point an OpenAI client at server.base_url ...
        server.batches                              # the request lines of each batch created

`POST /v1/files` (multipart, purpose `batch`) keeps the uploaded JSONL; `POST /v1/batches` answers each of its lines
with the handler (a chat completion, as the synchronous endpoint would) and stores the output file; the batch is
`in_progress` when first retrieved and `completed` after, so a client polls at least once;
`GET /v1/files/<id>/content` returns the output file. A line whose body holds a field the chat completions API does
not take (as the SDK types it) fails as the API fails it (`Unrecognized request argument supplied`), in the batch's
error file. A chat completion sent to the synchronous endpoint is refused (404): a test that meant to batch cannot
pass by sending its requests one by one; unless `probe` names the reply it gets (`edsb run --batch` sends one
synchronous request first, check-model's, and nothing else), or `sync` answers it (a synchronous pass over the same
endpoint), counted in `sync_requests` (their bodies in `sync_bodies`).

What `edsb run --batch` needs besides, each as the reference describes it:
- `GET /v1/batches` lists the batches with their `metadata`, newest first
  (https://platform.openai.com/docs/api-reference/batch/list).
- `held`: while set, a batch stays `in_progress` however often it is retrieved (a batch takes up to its 24-hour
  window: https://platform.openai.com/docs/api-reference/batch/object).
- `expire`: that many of the next batches end `expired`; the requests they did not answer are in the error file
  with the code `batch_expired` (https://platform.openai.com/docs/guides/batch, "Batch expiration").
- `line_reply(line)`: the reply of one request line instead of the handler's (a 500, a prompt over the context
  window): a line answered with an error status is in the output file with that status and the error body
  (https://platform.openai.com/docs/api-reference/batch/request-output).
- `custom_ids()`: every request id ever batched, in order, to count what was paid for.

And what a hostile or failing server does, for the tests that play one:
- `tamper(output) -> bytes`: the output file of each batch as served, rewritten (torn lines, foreign ids, ...).
- `mangle(lines) -> lines`: the request lines of each batch as the server takes them, rewritten before they are
  answered; its input file then holds them as taken (`GET /v1/files/<input>/content`, as the Files API serves any
  file: https://platform.openai.com/docs/api-reference/files/retrieve-contents).
- `faults[route]`: the statuses the next calls of a route answer, one each (`upload`, `create`, `retrieve`,
  `content`, `list`), in OpenAI's error body, with `retry-after-ms: 1` on a 429 or a 5xx
  (https://platform.openai.com/docs/guides/error-codes).
- `stall(route)`: the next call of `upload` (before the file is kept), `create` (after the batch is made, before the
  reply) or `content` never answers; the event it returns is set when that call arrives (for a kill -9 there).
- A line for `/v1/responses` (the Responses API in a batch: https://platform.openai.com/docs/api-reference/batch/create)
  is answered as the Responses API answers, through the chat shape `OpenAIServer` uses for every protocol.
"""

from __future__ import annotations

import email.parser
import email.policy
import importlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.loopback import JsonHandler, LoopbackServer
from tests.support.openai_server import CHAT_PATH, RESPONSES_PATH, RecordedRequest, Reply, as_chat, in_dialect

Handler = Callable[[RecordedRequest], Reply]


def _keys(module: str, name: str) -> frozenset[str]:
    """The fields of a request, as the installed `openai` SDK types them."""
    params = getattr(importlib.import_module(module), name)
    return frozenset(params.__required_keys__ | params.__optional_keys__)


_CHAT_KEYS = _keys("openai.types.chat.completion_create_params", "CompletionCreateParamsNonStreaming")
_RESPONSES_KEYS = _keys("openai.types.responses.response_create_params", "ResponseCreateParamsNonStreaming")


class OpenAIBatchServer(LoopbackServer):
    def __init__(
        self,
        handler: Handler,
        *,
        probe: Reply | None = None,
        line_reply: Callable[[dict[str, Any]], Reply | None] = (lambda line: None),
    ) -> None:
        self.handler = handler
        self.probe = probe
        self.line_reply = line_reply
        self.held = False
        self.sync: Handler | None = None  # answers the synchronous endpoint, once set (a synchronous pass)
        self.expire = 0
        self.tamper: Callable[[bytes], bytes] = lambda output: output
        self.mangle: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda lines: lines
        self.faults: dict[str, list[int]] = {}
        self._stalls: dict[str, threading.Event] = {}
        self._released = threading.Event()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, list[dict[str, Any]]] = {}  # batch id -> its request lines
        self.polls: dict[str, int] = {}
        self.sync_requests = 0
        self.sync_bodies: list[bytes] = []  # the body of each synchronous request, in order
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._batch_info: dict[str, dict[str, Any]] = {}

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}-{next(self._ids)}"

    def upload(self, body: bytes, content_type: str) -> dict[str, Any]:
        """A multipart upload: keep the file, answer with its file object."""
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body
        )
        parts = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        data = parts["file"].get_payload(decode=True)
        purpose = parts["purpose"].get_content().strip()
        file_id = self.new_id("file")
        with self._lock:
            self.files[file_id] = data
        return _file_object(file_id, len(data), purpose)

    def inputs(self) -> list[bytes]:
        """The input file of each batch, as uploaded."""
        with self._lock:
            return [self.files[info["input_file_id"]] for info in self._batch_info.values()]

    def custom_ids(self) -> list[str]:
        with self._lock:
            return [line["custom_id"] for lines in self.batches.values() for line in lines]

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """A batch: every line answered now by the handler, the output file stored."""
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
        taken = self.mangle(lines)
        if taken is not lines:
            lines = taken
            with self._lock:
                self.files[body["input_file_id"]] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        output, errors = [], []
        with self._lock:
            expired, self.expire = self.expire > 0, max(self.expire - 1, 0)
        for line in lines:
            if expired:
                failure = {"code": "batch_expired", "message": "This request could not be executed before the "
                           "completion window expired."}  # fmt: skip
                errors.append({"id": self.new_id("batch_req"), "custom_id": line["custom_id"], "response": None,
                               "error": failure})  # fmt: skip
                continue
            responses = line["url"] == RESPONSES_PATH  # the Responses API's body, answered in its own shape
            unknown = sorted(set(line["body"]) - (_RESPONSES_KEYS if responses else _CHAT_KEYS))
            if unknown:  # as the chat endpoint refuses it: that line fails, the others go on
                message = f"Unrecognized request argument supplied: {unknown[0]}"
                failure = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
                answer = {"status_code": 400, "request_id": line["custom_id"], "body": failure}
                errors.append({"id": self.new_id("batch_req"), "custom_id": line["custom_id"], "response": answer})
                continue
            request = RecordedRequest("POST", line["url"], {}, json.dumps(line["body"]).encode(), time.monotonic())
            if responses:
                reply = in_dialect(self.line_reply(line) or self.handler(as_chat(request, "responses")), "responses")
            else:
                reply = self.line_reply(line) or self.handler(request)
            answer = {"status_code": reply.status, "request_id": line["custom_id"], "body": json.loads(reply.body)}
            output.append({"id": self.new_id("batch_req"), "custom_id": line["custom_id"], "response": answer})
        output_id, error_id = self.new_id("file"), self.new_id("file") if errors else None
        batch_id = self.new_id("batch")
        info = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": body["completion_window"],
            "created_at": int(time.time()),
            "output_file_id": output_id,
            "error_file_id": error_id,
            "request_counts": {"total": len(lines), "completed": len(output), "failed": len(errors)},
            "metadata": body.get("metadata"),
            "final_status": "expired" if expired else "completed",
        }
        with self._lock:
            self.files[output_id] = self.tamper("".join(json.dumps(entry) + "\n" for entry in output).encode())
            if error_id is not None:
                self.files[error_id] = "".join(json.dumps(entry) + "\n" for entry in errors).encode()
            self.batches[batch_id] = lines
            self._batch_info[batch_id] = info
            self.polls[batch_id] = 0
        return {**info, "status": "validating", "output_file_id": None}

    def stall(self, route: str) -> threading.Event:
        arrived = threading.Event()
        with self._lock:
            self._stalls[route] = arrived
        return arrived

    def stalled(self, route: str) -> None:
        """Hold this call until the server stops, if a stall was asked for `route`."""
        with self._lock:
            arrived = self._stalls.pop(route, None)
        if arrived is not None:
            arrived.set()
            self._released.wait()

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        super().__exit__(*exc)

    def fault(self, route: str) -> int | None:
        """The status the next call of `route` answers instead of its own, if one is queued."""
        with self._lock:
            queued = self.faults.get(route) or []
            return queued.pop(0) if queued else None

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            self.polls[batch_id] += 1
            done = self.polls[batch_id] > 1 and not self.held
        info = {**self._batch_info[batch_id]}
        final = info.pop("final_status")
        if done:
            return {**info, "status": final}
        counts = {**info["request_counts"], "completed": 0, "failed": 0}  # nothing answered yet
        return {
            **info,
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": counts,
        }

    def listing(self) -> dict[str, Any]:
        with self._lock:
            infos = [{**info, "status": "in_progress"} for info in reversed(self._batch_info.values())]
        for info in infos:
            info.pop("final_status")
        return {"object": "list", "data": infos, "first_id": None, "last_id": None, "has_more": False}


def _file_object(file_id: str, size: int, purpose: str) -> dict[str, Any]:
    created = int(time.time())
    return {"id": file_id, "object": "file", "bytes": size, "created_at": created, "filename": "batch.jsonl",
            "purpose": purpose, "status": "processed"}  # fmt: skip


class _BatchHandler(JsonHandler):
    server_owner: OpenAIBatchServer

    def do_POST(self) -> None:
        body, owner = self._body(), self.server_owner
        if self._faulted({"/v1/files": "upload", "/v1/batches": "create"}.get(self.path)):
            return
        if self.path == "/v1/files":
            owner.stalled("upload")
            self._json(owner.upload(body, self.headers.get("Content-Type", "")))
        elif self.path == "/v1/batches":
            created = owner.create(json.loads(body))
            owner.stalled("create")
            self._json(created)
        else:
            if self.path == CHAT_PATH:
                owner.sync_requests += 1
                owner.sync_bodies.append(body)
                if owner.sync is not None:
                    reply = owner.sync(RecordedRequest("POST", CHAT_PATH, {}, body, time.monotonic()))
                    self._send(reply.body, reply.status)
                    return
                if owner.probe is not None:
                    self._send(owner.probe.body, owner.probe.status)
                    return
            self._json({"error": {"message": f"no route {self.path}"}}, 404)

    def do_GET(self) -> None:
        owner, path = self.server_owner, self.path.partition("?")[0]
        route = "list" if path == "/v1/batches" else "content" if path.endswith("/content") else "retrieve"
        if self._faulted(route):
            return
        if path == "/v1/batches":
            self._json(owner.listing())
        elif path.startswith("/v1/batches/"):
            self._json(owner.retrieve(path.removeprefix("/v1/batches/")))
        elif path.startswith("/v1/files/") and path.endswith("/content"):
            owner.stalled("content")
            self._send(owner.files[path.removeprefix("/v1/files/").removesuffix("/content")], 200, "application/jsonl")
        else:
            self._json({"error": {"message": f"no route {path}"}}, 404)

    def _json(self, payload: Any, status: int = 200) -> None:
        self._send(json.dumps(payload).encode(), status)

    def _faulted(self, route: str | None) -> bool:
        """Answer with the status queued for `route`, if any, as OpenAI's API answers an error."""
        status = self.server_owner.fault(route) if route else None
        if status is None:
            return False
        error = {"message": f"HTTP {status} from the fake", "type": "server_error", "param": None, "code": None}
        body = json.dumps({"error": error}).encode()
        self.send_response(status)
        if status == 429 or status >= 500:
            self.send_header("retry-after-ms", "1")  # OpenAI's own header, which the SDK reads first
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return True


OpenAIBatchServer.handler_class = _BatchHandler
