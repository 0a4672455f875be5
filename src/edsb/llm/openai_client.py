"""`openai:<model>`: any server that speaks the OpenAI chat completions API, over `edsb.llm.http`.

edsb speaks the one endpoint it needs (`POST {base_url}/chat/completions`, bearer key) directly rather than through
the openai SDK or a general HTTP library: measured side by side against the same loopback server, the SDK's request
path cost about 1.4 ms of CPU per request and aiohttp's about 0.35 ms more than edsb's own client (`edsb.llm.http`),
and at benchmark concurrency that difference is most of the harness's CPU (benchmarks/bench_sweep.py). What the SDK
added beyond the bytes is kept here: base URL and key resolution, retries with backoff and Retry-After, and errors
sorted into `TransportError` kinds by what failed (no connection at all, a connection broken after opening, a
timeout, an HTTP status, a body that is no completion).

The raw body is parsed here because compatible servers differ in what they leave out (usage, model) and a 200 whose
body is not a completion must be reported as such. Every admitted request has a connection of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import from_json, to_json

from edsb import __version__
from edsb.llm.errors import ApiKeyError, ModelSpecError, TransportError, TransportKind
from edsb.llm.http import ConnectFailed, ConnectionBroken, HttpClient
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


def _error_message(body: bytes, status: int) -> str:
    """The server's own words for a failed request: OpenAI's `{"error": {"message": ...}}`, else the body."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _flat(error["message"])
        if isinstance(error, str):
            return _flat(error)
    return _flat(text) or f"HTTP {status} with an empty body"


def _connection_failure(exc: ConnectFailed | ConnectionBroken | OSError) -> _Failure:
    """`unreachable` when no connection could be opened at all, `connection` when one broke after opening
    (a reset, a disconnect, a body cut short): only the first suggests a wrong address or a server that is down."""
    kind: TransportKind = "unreachable" if isinstance(exc, ConnectFailed) else "connection"
    detail = str(exc) or repr(exc)
    return _Failure(kind, _flat(f"{type(exc).__name__}: {detail}"))


def parse_completion(body: bytes, requested_model: str, latency_s: float, attempts: int) -> ChatResponse:
    """A ChatResponse from a completion body; `_Failure` when the body is not a completion at all."""
    try:
        data = from_json(body)  # pydantic-core's parser: json.loads on bytes spends as long detecting the encoding
    except ValueError:
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


def _env_proxy(url: str) -> str | None:
    """The proxy `HTTP_PROXY` / `HTTPS_PROXY` name for this URL, unless `NO_PROXY` exempts its host."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return proxy
    return None


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    At most `max_in_flight` requests are on the wire at once (waits between retries do not count). The HTTP session
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
        self._proxy = _env_proxy(self.base_url)  # read once: the environment does not change under a run
        self._loop: asyncio.AbstractEventLoop | None = None
        self._path = urlsplit(self.base_url).path + CHAT_PATH
        try:  # an address, proxy or key that cannot work is a usage error now, not a failure of every run
            self._http: HttpClient | None = self._new_client()
        except ValueError as exc:
            raise ModelSpecError(f"{self.base_url}: {exc}") from None
        self._gate: asyncio.Semaphore | None = None
        self._answered = False  # has any request reached the server (any HTTP response)?

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def identity(self) -> str:
        return f"openai:{self.model}@{self.base_url}"

    def _new_client(self) -> HttpClient:
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"edsb/{__version__}",
        }
        return HttpClient(self.base_url, headers, proxy=self._proxy)

    def _session(self) -> tuple[HttpClient, asyncio.Semaphore]:
        """The client and the in-flight limit of the running loop (connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._gate is None or self._loop is not loop:
            if self._http is None or self._loop is not None:  # the first loop uses the client built with the model
                self._http = self._new_client()
            self._gate = asyncio.Semaphore(self.max_in_flight)
            self._loop = loop
        return self._http, self._gate

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,  # serialised by `to_json` as they are
            "temperature": request.temperature,
        }
        if request.json_mode:
            params["response_format"] = {"type": "json_object"}
        for name in ("max_tokens", "top_p", "seed"):
            value = getattr(request, name)
            if value is not None:
                params[name] = value
        return params

    async def _attempt(self, http: HttpClient, body: bytes) -> tuple[bytes, float]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await http.post(self._path, body)
        except TimeoutError:
            raise _Failure("timeout", f"no complete response within {self.timeout_s:g} s") from None
        except (ConnectFailed, ConnectionBroken, OSError) as exc:
            raise _connection_failure(exc) from exc
        self._answered = True
        status = response.status
        if not 200 <= status < 300:
            retry_after = retry_after_s(response.headers)
            raise _Failure("http", _error_message(response.body, status), status=status, retry_after=retry_after)
        return response.body, time.perf_counter() - started

    async def complete(self, request: ChatRequest) -> ChatResponse:
        http, gate = self._session()
        body = to_json(self._params(request))  # pydantic's serialiser: a third of `json.dumps`'s time
        attempt = 0
        while True:
            attempt += 1
            try:
                async with gate:
                    payload, latency_s = await self._attempt(http, body)
                return parse_completion(payload, self.model, latency_s, attempt)
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
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = None
        self._gate = self._loop = None
