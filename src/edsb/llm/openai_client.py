"""`openai:<model>`: any server that speaks the OpenAI chat completions API, through the official SDK.

The SDK's own retries are switched off: this module owns the retry loop so that backoff is configurable, Retry-After
is honoured on every retryable failure, attempts are counted, and failures come out as one `TransportError` type.
The raw body is parsed here rather than by the SDK, because compatible servers differ in what they leave out (usage,
model) and a 200 whose body is not a completion must be reported as such, not as an attribute error later.

Requests go through the SDK's low-level `post` (auth, base URL, headers and its error types) rather than
`chat.completions.create`: that one first walks every message through the SDK's typed-dict transform, which costs
milliseconds per request on benchmark prompts, while our messages are already plain JSON. The connection pool is
sized to the number of requests in flight, so `--concurrency 256` keeps 256 connections alive instead of the SDK's
default keep-alive cap of 100 reopening the rest, and split into shards of at most `POOL_SHARD` connections, each
its own SDK client: the HTTP library's pool walks every one of its connections for each request it places, which
at 256 connections costs a fifth of the harness's CPU. The SDK is imported on first use: commands that never talk
to an OpenAI-compatible server do not pay for its import.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from edsb.llm.errors import ApiKeyError, TransportError, TransportKind
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.retry import RetryPolicy, is_retryable_status, retry_after_s

DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"
# Sent to self-hosted servers (vLLM, Ollama, llama.cpp, LM Studio) when no key is configured: they ignore it.
KEYLESS_PLACEHOLDER = "no-key"
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_MAX_IN_FLIGHT = 16
# Connection failures before the endpoint has answered even once are most likely a wrong address or a server that is
# down: retry them only briefly, so a dead endpoint fails in seconds instead of minutes of backoff per run.
UNREACHED_MAX_RETRIES = 2
_SNIPPET = 160
CHAT_PATH = "/chat/completions"
POOL_SHARD = 16  # connections per SDK client (see the module docstring)

if TYPE_CHECKING:
    import openai


@functools.cache
def _sdk() -> tuple[ModuleType, ModuleType]:
    """The openai SDK and the HTTP library it is built on: httpx2 from openai 3 on, httpx before."""
    import openai

    http: ModuleType
    try:
        http = importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - older SDKs
        http = importlib.import_module("httpx")
    if not issubclass(openai.DefaultAsyncHttpxClient, http.AsyncClient):  # pragma: no cover - older SDKs
        http = importlib.import_module("httpx")
    return openai, http


def resolve_base_url(base_url: str | None = None) -> str:
    """`--base-url`, else `$OPENAI_BASE_URL`, else OpenAI; without a trailing slash so one server has one identity."""
    url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    return url.strip().rstrip("/")


def resolve_api_key(base_url: str, api_key_env: str | None = None) -> str:
    """The key from the named variable (which must then be set), else `$OPENAI_API_KEY`.

    Only OpenAI itself insists on a key up front; a self-hosted server gets a placeholder and says 401 if it
    wanted one.
    """
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ApiKeyError(f"environment variable {api_key_env} (named by --api-key-env) is not set or empty")
        return value
    value = os.environ.get(API_KEY_ENV)
    if value:
        return value
    if base_url == DEFAULT_BASE_URL:
        raise ApiKeyError(f"{API_KEY_ENV} is not set: export it, or name the key variable with --api-key-env")
    return KEYLESS_PLACEHOLDER


def _flat(text: str) -> str:
    return " ".join(text.split())


def _one_line(text: str, limit: int = _SNIPPET) -> str:
    """Flattened and shortened for an error line. Shorten only after redacting secrets: a cut through a key
    would leave part of it unrecognisable to the redaction."""
    flat = _flat(text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class _Failure(Exception):
    """One failed attempt, before the retry loop decides whether it was the last."""

    def __init__(
        self, kind: TransportKind, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind: TransportKind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status is None or is_retryable_status(self.status)


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _flat(error["message"])
        if isinstance(error, str):
            return _flat(error)
    return _flat(exc.message)


def _classify(exc: openai.APIError | TimeoutError, timeout_s: float) -> _Failure:
    openai, _ = _sdk()
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return _Failure("timeout", f"no complete response within {timeout_s:g} s")
    if isinstance(exc, openai.APIStatusError):
        return _Failure(
            "http",
            _status_message(exc),
            status=exc.status_code,
            retry_after=retry_after_s(dict(exc.response.headers)),
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        # The SDK's HTTP library (httpx, or the copy it vendors) says ConnectError / ConnectTimeout when no
        # connection could be opened at all; matched by name so either library is recognised.
        opened = not any(k.__name__ in ("ConnectError", "ConnectTimeout") for k in type(cause).__mro__)
        kind: TransportKind = "connection" if opened else "unreachable"
        return _Failure(kind, _flat(f"{type(cause).__name__}: {cause}"))
    return _Failure("invalid_response", _flat(f"{type(exc).__name__}: {exc}"))


def parse_completion(body: bytes, requested_model: str, latency_s: float, attempts: int) -> ChatResponse:
    """A ChatResponse from a completion body; `_Failure` when the body is not a completion at all."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        snippet = _one_line(body[: 4 * _SNIPPET].decode("utf-8", "replace"))
        raise _Failure("invalid_response", f"body is not JSON: {snippet!r}") from None
    if not isinstance(data, dict):
        raise _Failure("invalid_response", "body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        detail = f" (error: {_flat(json.dumps(error))})" if error else ""
        raise _Failure("invalid_response", f"completion has no choices{detail}")
    first = choices[0]
    message = first.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    reported_model = data.get("model")
    return ChatResponse(
        text=content if isinstance(content, str) else "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        model=reported_model if isinstance(reported_model, str) and reported_model else requested_model,
        finish_reason=first.get("finish_reason") if isinstance(first.get("finish_reason"), str) else None,
        attempts=attempts,
    )


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    At most `max_in_flight` requests are on the wire at once (waits between retries do not count). The SDK client
    and the limit belong to one event loop; they are rebuilt when the model is used from another one.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_in_flight = max_in_flight
        self._api_key = resolve_api_key(self.base_url, api_key_env)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[openai.AsyncOpenAI] = []
        self._load: list[int] = []  # requests on the wire per client
        self._response_type: type = object  # the SDK's raw response class, set with the client
        self._gate: asyncio.Semaphore | None = None
        self._answered = False  # has any request reached the server (any HTTP response)?

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def identity(self) -> str:
        return f"openai:{self.model}@{self.base_url}"

    def _session(self) -> tuple[list[openai.AsyncOpenAI], asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if not self._clients or self._gate is None or self._loop is not loop:
            openai, http = _sdk()
            shards = -(-self.max_in_flight // POOL_SHARD)
            size = -(-self.max_in_flight // shards)
            limits = http.Limits(max_connections=size, max_keepalive_connections=size)
            # One TLS context for every shard: building one reads the CA store, tens of milliseconds each.
            tls: dict[str, Any] = {"verify": http.create_ssl_context()} if shards > 1 else {}
            self._clients = [
                openai.AsyncOpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout_s,
                    max_retries=0,
                    http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout_s, **tls),
                )
                for _ in range(shards)
            ]
            self._load = [0] * shards
            self._response_type = http.Response
            self._gate = asyncio.Semaphore(self.max_in_flight)
            self._loop = loop
        return self._clients, self._gate

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [message.model_dump() for message in request.messages],
            "temperature": request.temperature,
        }
        if request.json_mode:
            params["response_format"] = {"type": "json_object"}
        for name in ("max_tokens", "top_p", "seed"):
            value = getattr(request, name)
            if value is not None:
                params[name] = value
        return params

    async def _attempt(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> tuple[bytes, float]:
        openai, _ = _sdk()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                raw: Any = await client.post(CHAT_PATH, cast_to=self._response_type, body=params)
                body = raw.content
        except (openai.APIError, TimeoutError) as exc:
            raise _classify(exc, self.timeout_s) from exc
        return body, time.perf_counter() - started

    async def complete(self, request: ChatRequest) -> ChatResponse:
        clients, gate = self._session()
        params = self._params(request)
        attempt = 0
        while True:
            attempt += 1
            try:
                async with gate:
                    # The least busy shard always has a free connection: the gate admits at most what they hold.
                    shard = self._load.index(min(self._load))
                    self._load[shard] += 1
                    try:
                        body, latency_s = await self._attempt(clients[shard], params)
                    finally:
                        self._load[shard] -= 1
                self._answered = True
                return parse_completion(body, self.model, latency_s, attempt)
            except _Failure as failure:
                if failure.kind != "unreachable":
                    self._answered = True
                max_retries = self.retry.max_retries
                if failure.kind == "unreachable" and not self._answered:
                    max_retries = min(max_retries, UNREACHED_MAX_RETRIES)
                if not failure.retryable or attempt > max_retries:
                    message = _one_line(self._redact(failure.message))
                    if failure.status == 404:
                        message += " (does --base-url end in /v1, and does the server serve this model name?)"
                    raise TransportError(failure.kind, message, attempts=attempt, status=failure.status) from None
                await asyncio.sleep(self.retry.delay_s(attempt, failure.retry_after))

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key in error bodies; errors end up in transcripts and on screen."""
        return text.replace(self._api_key, "***") if self._api_key != KEYLESS_PLACEHOLDER else text

    async def aclose(self) -> None:
        if self._clients and self._loop is asyncio.get_running_loop():
            for client in self._clients:
                await client.close()
        self._clients, self._load = [], []
        self._gate = self._loop = None
