"""A scriptable OpenAI-compatible server on 127.0.0.1 for tests: real HTTP, real sockets, faults on demand.

    with OpenAIServer() as server:                      # or the `openai_server` fixture
        server.enqueue(Reply.rate_limited(retry_after="1"), Reply.completion('{"a": 1}'))
        ... point a client at server.base_url ...
        server.chat_requests[0].json()["messages"]

`POST /v1/chat/completions` answers from the queue first, then from `handler(request) -> Reply` if one is given,
else with a short default completion. `GET /v1/models` lists `model_name`. Every request is recorded with its
headers and body; `max_in_flight` tells how many chat requests were open at once. Faults: latency (`delay_s`), any
status, `Retry-After`, connection reset, a hang until the client gives up, a body cut short of its Content-Length, a
non-JSON body, a completion without choices. A `validator` (tests/support/provider_fakes.py) refuses what a
provider's API refuses, before the queue and the handler see the request.

The same server speaks two more wire protocols, so that one scripted model answers every provider alike:
Anthropic's Messages API (`POST /v1/messages`; point the SDK's `base_url` at `server.root_url`) and Gemini's
`POST /v1beta/models/<model>:generateContent` (google-genai's `HttpOptions(base_url=server.root_url)`), and
OpenAI's Responses API (`POST /v1/responses`). A request in
either is recorded as sent (`native_requests`), shown to the queue and the handler as the chat completion it amounts
to, and the chat-shaped reply (a completion or an `{"error": ...}`) is sent back in the protocol's own shape; any
other reply body (a native payload, text, an oversized body) goes out as it is.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

Fault = Literal["reset", "hang", "truncate"]
Dialect = Literal["openai", "anthropic", "google", "responses"]
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
ANTHROPIC_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
# Gemini's path on the Gemini API, and on Vertex AI under a project and region (google-genai's `v1beta1`).
GEMINI_PATH = re.compile(
    r"/v1(?:beta1?)?/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?models/(?P<model>[^/:]+):generateContent"
)
# Claude's Messages API on the clouds: Bedrock's InvokeModel and Vertex AI's rawPredict, the model in the path.
ANTHROPIC_CLOUD_PATH = re.compile(
    r"/model/(?P<bedrock>[^/]+)/invoke|/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/(?P<vertex>[^/:]+):rawPredict"
)
# An OAuth token endpoint, for Google credentials whose `token_uri` names this server.
TOKEN_PATH = "/token"
ACCESS_TOKEN = "ya29.loopback-access-token"
# Azure OpenAI's classic deployment URL: the deployment in the path, the API version in the query.
AZURE_PATH = re.compile(r"/openai/deployments/(?P<deployment>[^/]+)/chat/completions")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    received_at: float  # time.monotonic() when the request line arrived
    query: str = ""  # the query string, without its `?`

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """What the server does with one request; build it with the class methods."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # waited before anything is sent back
    fault: Fault | None = None

    @classmethod
    def json(
        cls, payload: Any, *, status: int = 200, headers: Mapping[str, str] | None = None, delay_s: float = 0.0
    ) -> Reply:
        merged = {"Content-Type": "application/json", **(headers or {})}
        return cls(status, json.dumps(payload).encode(), merged, delay_s)

    @classmethod
    def completion(
        cls,
        text: str | None,
        *,
        prompt_tokens: int = 11,
        completion_tokens: int = 5,
        finish_reason: str | None = "stop",
        model: str = "test-model",
        delay_s: float = 0.0,
    ) -> Reply:
        return cls.json(
            completion_payload(text, prompt_tokens, completion_tokens, finish_reason, model), delay_s=delay_s
        )

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, headers: Mapping[str, str] | None = None) -> Reply:
        payload = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return cls.json(payload, status=status, headers=headers)

    @classmethod
    def rate_limited(cls, retry_after: str | None = None, *, retry_after_ms: str | None = None) -> Reply:
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        if retry_after_ms is not None:
            headers["retry-after-ms"] = retry_after_ms
        return cls.error(429, "rate limit reached", headers=headers)

    @classmethod
    def text(cls, body: str, *, status: int = 200, content_type: str = "text/html") -> Reply:
        return cls(status, body.encode(), {"Content-Type": content_type})

    @classmethod
    def empty_choices(cls) -> Reply:
        payload = completion_payload("unused", 3, 0, "stop", "test-model")
        payload["choices"] = []
        return cls.json(payload)

    @classmethod
    def reset(cls) -> Reply:
        """Close the connection with a TCP reset instead of answering."""
        return cls(fault="reset")

    @classmethod
    def hang(cls) -> Reply:
        """Read the request and never answer (until the server stops)."""
        return cls(fault="hang")

    @classmethod
    def truncated(cls, text: str = "cut short") -> Reply:
        """Announce a full completion's Content-Length, send half of it and close."""
        full = cls.completion(text)
        return cls(200, full.body, full.headers, fault="truncate")


def completion_payload(
    text: str | None, prompt_tokens: int, completion_tokens: int, finish_reason: str | None, model: str
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def default_reply(request: RecordedRequest) -> Reply:
    """A short valid answer: a JSON object when JSON mode was asked for, plain text otherwise."""
    body = request.json()
    json_mode = (body.get("response_format") or {}).get("type") == "json_object"
    return Reply.completion('{"ok": true}' if json_mode else "ok", model=body.get("model", "test-model"))


Handler = Callable[[RecordedRequest], Reply]
Validator = Callable[[RecordedRequest, Dialect], "Reply | None"]


class OpenAIServer:
    """The server runs in a daemon thread; `stop()` releases hanging requests so it shuts down at once."""

    def __init__(
        self, handler: Handler | None = None, *, model_name: str = "test-model", validator: Validator | None = None
    ) -> None:
        self.handler = handler
        self.validator = validator  # a provider's rules: its refusal of a request, before the queue and the handler
        self.model_name = model_name
        self._replies: queue.SimpleQueue[Reply] = queue.SimpleQueue()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def root_url(self) -> str:
        """The address without `/v1`: what the Anthropic and Google SDKs take as their base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [request for request in self.requests if request.path == CHAT_PATH]

    @property
    def native_requests(self) -> list[RecordedRequest]:
        """Requests in the Anthropic or Gemini protocol, as they were sent."""
        return [request for request in self.requests if dialect_of(request.path) in ("anthropic", "google")]

    @property
    def max_in_flight(self) -> int:
        """The most chat requests that were open at once (read, not yet answered): how far a client overlaps."""
        with self._lock:
            return self._max_in_flight

    def enqueue(self, *replies: Reply) -> None:
        for reply in replies:
            self._replies.put(reply)

    def start(self) -> Self:
        server = self

        class _Handler(_RequestHandler):
            owner = server

        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _opened(self, change: int) -> None:
        with self._lock:
            self._in_flight += change
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _reply_for(self, request: RecordedRequest) -> Reply:
        try:
            return self._replies.get_nowait()
        except queue.Empty:
            pass
        return (self.handler or default_reply)(request)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # http.server's listen backlog is 5: a burst of new connections beyond it has its SYNs dropped and retried a
    # second later, delays no production server (uvicorn: 2048) would add.
    request_queue_size = 2048

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Faults close sockets under the handler's feet; the resulting errors are the point, not news."""


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: OpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def setup(self) -> None:
        # As production servers do: http.server sends headers and body separately, and without TCP_NODELAY Nagle's
        # algorithm holds the body until the client's delayed ACK (40 ms on Linux), which would look like latency.
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read_request(self) -> RecordedRequest:
        received_at = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        path, _, query = self.path.partition("?")
        request = RecordedRequest(self.command, path, headers, body, received_at, query)
        self.owner._record(request)
        return request

    def do_GET(self) -> None:
        request = self._read_request()
        if request.path == MODELS_PATH:
            models = {"object": "list", "data": [{"id": self.owner.model_name, "object": "model", "owned_by": "test"}]}
            self._send(Reply.json(models))
        else:
            self._send(Reply.error(404, f"no route {request.path}"))

    def do_POST(self) -> None:
        request = self._read_request()
        dialect = dialect_of(request.path)
        if request.path == TOKEN_PATH:  # an OAuth refresh (https://developers.google.com/identity/protocols/oauth2)
            self._send(Reply.json({"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}))
            return
        if dialect is None:
            self._send(Reply.error(404, f"no route {request.path}"))
            return
        self.owner._opened(+1)
        self._open = True
        try:
            try:
                refusal = self.owner.validator(request, dialect) if self.owner.validator else None
                reply = refusal or self.owner._reply_for(as_chat(request, dialect))
            except Exception as exc:  # a broken test handler should surface as a 500, not a hung client
                reply = Reply.error(500, f"test handler raised {type(exc).__name__}: {exc}")
            self._send(in_dialect(reply, dialect))
        finally:
            self._close_request()

    def _close_request(self) -> None:
        """The request stops counting as open just before its answer goes out, so a client that waits for the
        answer before it asks again is never seen with two requests open."""
        if getattr(self, "_open", False):
            self._open = False
            self.owner._opened(-1)

    def _send(self, reply: Reply) -> None:
        if reply.delay_s and self.owner._stopping.wait(reply.delay_s):
            self.close_connection = True
            return
        if reply.fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if reply.fault == "hang":
            self.owner._stopping.wait()
            self.close_connection = True
            return
        self._close_request()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if reply.fault == "truncate":
            self.wfile.write(reply.body[: len(reply.body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(reply.body)


def dialect_of(path: str) -> Dialect | None:
    if path == CHAT_PATH or AZURE_PATH.fullmatch(path):
        return "openai"
    if path == ANTHROPIC_PATH or ANTHROPIC_CLOUD_PATH.fullmatch(path):
        return "anthropic"
    if path == RESPONSES_PATH:
        return "responses"
    if GEMINI_PATH.fullmatch(path):
        return "google"
    return None


def _text_of(parts: Any) -> str:
    """Anthropic's content (a string or blocks) or Gemini's parts, as one string."""
    if isinstance(parts, str):
        return parts
    return "".join(part.get("text", "") for part in parts or [] if isinstance(part, dict))


def as_chat(request: RecordedRequest, dialect: Dialect) -> RecordedRequest:
    """The chat completion a native request amounts to (its system prompt first, Gemini's `model` turns as
    `assistant`), so the queue's replies and the scripted handlers serve every protocol."""
    if dialect == "openai":
        return request
    body = request.json()
    messages: list[dict[str, str]] = []
    chat: dict[str, Any] = {}
    if dialect == "responses":
        items = body.get("input", [])  # a string is one user message
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items
        messages += [{"role": m["role"], "content": _text_of(m["content"])} for m in items]
        chat.update(model=body.get("model"), temperature=body.get("temperature"))
        if ((body.get("text") or {}).get("format") or {}).get("type") == "json_object":
            chat["response_format"] = {"type": "json_object"}
    elif dialect == "anthropic":
        if body.get("system"):
            messages.append({"role": "system", "content": _text_of(body["system"])})
        messages += [{"role": m["role"], "content": _text_of(m["content"])} for m in body.get("messages", [])]
        chat.update(model=body.get("model"), temperature=body.get("temperature"), max_tokens=body.get("max_tokens"))
    else:
        match = GEMINI_PATH.fullmatch(request.path)
        assert match is not None
        system = body.get("systemInstruction") or body.get("system_instruction")
        if system:
            messages.append({"role": "system", "content": _text_of(system.get("parts"))})
        for content in body.get("contents", []):
            role = "assistant" if content.get("role") == "model" else "user"
            messages.append({"role": role, "content": _text_of(content.get("parts"))})
        config = body.get("generationConfig") or {}
        chat.update(model=match["model"], temperature=config.get("temperature"))
        if config.get("responseMimeType") == "application/json":
            chat["response_format"] = {"type": "json_object"}
    chat["messages"] = messages
    return RecordedRequest(request.method, CHAT_PATH, request.headers, json.dumps(chat).encode(), request.received_at)


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens"}
_GEMINI_STOP = {"stop": "STOP", "length": "MAX_TOKENS"}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def responses_payload(
    text: str, usage: dict[str, Any], model: str, reasoning: str | None = None, reasoning_tokens: int = 0
) -> dict[str, Any]:
    """A Responses API reply: a reasoning item with its summary, then the message's output text
    (https://platform.openai.com/docs/api-reference/responses/object)."""
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        output.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": reasoning}]})
    content = [{"type": "output_text", "text": text, "annotations": []}]
    output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content})
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": prompt + completion,
        },
    }


def in_dialect(reply: Reply, dialect: Dialect) -> Reply:
    """A chat-shaped reply in the protocol's own shape; faults, and bodies that are neither a completion nor an
    error object, unchanged."""
    if dialect == "openai" or reply.fault in ("reset", "hang"):
        return reply
    try:
        payload = json.loads(reply.body)
    except ValueError:
        return reply
    if not isinstance(payload, dict):
        return reply
    headers = dict(reply.headers)
    if isinstance(payload.get("choices"), list) and payload["choices"]:
        choice = payload["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        usage = payload.get("usage") or {}
        if dialect == "responses":
            native: dict[str, Any] = responses_payload(text, usage, payload.get("model", "test-model"))
        elif dialect == "anthropic":
            native = {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": payload.get("model", "test-model"),
                "content": [{"type": "text", "text": text}],
                "stop_reason": _ANTHROPIC_STOP.get(choice.get("finish_reason"), "end_turn"),
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage.get("prompt_tokens", 0),
                    "output_tokens": usage.get("completion_tokens", 0),
                },
            }
        else:
            prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            native = {
                "candidates": [
                    {
                        "content": {"parts": [{"text": text}], "role": "model"},
                        "finishReason": _GEMINI_STOP.get(choice.get("finish_reason"), "STOP"),
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": completion,
                    "totalTokenCount": prompt + completion,
                },
                "modelVersion": payload.get("model", "test-model"),
            }
    elif isinstance(payload.get("error"), dict) and set(payload) == {"error"} and dialect != "responses":
        message = payload["error"].get("message", "")
        if dialect == "anthropic":
            kind = _ANTHROPIC_ERRORS.get(reply.status, "api_error")
            native = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            # Gemini says how long to wait in the body (google.rpc.RetryInfo), not in a header.
            details = []
            wait = {name.lower(): value for name, value in headers.items()}.get("retry-after")
            if wait is not None:
                headers = {name: value for name, value in headers.items() if name.lower() != "retry-after"}
                details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait}s"})
            status = _GEMINI_STATUS.get(reply.status, "UNKNOWN")
            native = {"error": {"code": reply.status, "message": message, "status": status, "details": details}}
    else:
        return reply
    return Reply(reply.status, json.dumps(native).encode(), headers, reply.delay_s, reply.fault)
