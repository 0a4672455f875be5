"""`openai:<model>` and the other OpenAI-compatible providers (`deepinfra`, `groq`, `cerebras`, `lepton`): any server
that speaks the OpenAI chat completions API, over aiohttp.

edsb speaks the one endpoint it needs (`POST {base_url}/chat/completions`, bearer key) over aiohttp, as
lm-evaluation-harness's API models do, rather than through the openai SDK, whose request path (typed request
building, httpx's pool) cost about 1.4 ms of CPU per request against aiohttp's 0.3 (benchmarks/README.md). What the
SDK adds beyond the bytes is kept here: base URL and key resolution, retries with backoff and Retry-After, and errors
sorted into `TransportError` kinds by what failed. Each aiohttp exception is mapped explicitly (`_client_failure`):
no connection at all (`unreachable`: refused, name resolution, TLS verification, a proxy that refuses the tunnel), a
connection broken after opening (`connection`: a reset, a body cut short, a reply that is not HTTP), a `timeout`, an
HTTP status (`http`), a reply over edsb's size limits (`oversized`), a body that is no completion
(`invalid_response`).

Everything a server sends is bounded: the body by `max_response_bytes` (read a piece at a time and abandoned once
over, so an endless body costs no more memory than the limit), the head by aiohttp's parser limits on header count
and line length. The raw body is parsed here because compatible servers differ in what they leave out (usage, model)
and a 200 whose body is not a completion must be reported as such. The pool holds a connection for every request in
flight. aiohttp is imported with the first request: other commands do not pay for its import, and `edsb run` has
started its sandbox pool by then.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
import urllib.request
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic_core import from_json, to_json

from edsb import __version__
from edsb.llm.errors import ApiKeyError, ModelSpecError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.providers import OPENAI_URL, PROVIDERS, Provider
from edsb.llm.retry import AttemptFailure, Reach, RetryPolicy, retry_after_s, send_with_retries

OPENAI = PROVIDERS["openai"]
DEFAULT_BASE_URL = OPENAI_URL
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = OPENAI.key_env
# Sent to self-hosted servers (vLLM, Ollama, llama.cpp, LM Studio) when no key is configured: they ignore it.
KEYLESS_PLACEHOLDER = "no-key"
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_MAX_IN_FLIGHT = 16
_SNIPPET = 160
CHAT_PATH = "/chat/completions"
# What a server may send back. The body limit has an option (`--max-response-mb`); the head's are aiohttp's parser
# limits, set here so that the documented values do not move with aiohttp's defaults.
DEFAULT_MAX_RESPONSE_BYTES = 16 << 20
MAX_RESPONSE_HEADERS = 128
MAX_HEADER_LINE_BYTES = 8190
# A token count beyond any context window (and beyond what a JSON reader in a browser holds exactly).
_MAX_TOKEN_COUNT = 2**53

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL


def resolve_base_url(base_url: str | None = None, provider: Provider = OPENAI, model: str = "") -> str:
    """`--base-url`, else (for `openai:` only) `$OPENAI_BASE_URL`, else the provider's host; without a trailing slash
    so one server has one identity."""
    url = base_url or (os.environ.get(BASE_URL_ENV) if provider is OPENAI else None) or provider.url_for(model) or ""
    return url.strip().rstrip("/")


def resolve_api_key(
    base_url: str, api_key_env: str | None = None, provider: Provider = OPENAI, default_url: str | None = None
) -> str:
    """The key from the named variable (which must then be set), else the provider's own variable.

    A provider's own host insists on a key up front; any other server (self-hosted, behind `--base-url`) gets a
    placeholder and says 401 if it wanted one.
    """
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ApiKeyError(f"environment variable {api_key_env} (named by --api-key-env) is not set or empty")
        return value
    value = os.environ.get(provider.key_env)
    if value:
        return value
    if base_url == (default_url or DEFAULT_BASE_URL):
        raise ApiKeyError(f"{provider.key_env} is not set: export it, or name the key variable with --api-key-env")
    return KEYLESS_PLACEHOLDER


def _flat(text: str) -> str:
    return " ".join(text.split())


def one_line(text: str, limit: int = _SNIPPET) -> str:
    """Flattened and shortened for an error line. Shorten only after redacting secrets: a cut through a key
    would leave part of it unrecognisable to the redaction."""
    flat = _flat(text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def error_message(body: bytes, status: int) -> str:
    """The server's own words for a failed request: OpenAI's `{"error": {"message": ...}}`, else the body."""
    text = body.decode("utf-8", "replace")
    try:
        data = from_json(body)
    except ValueError:  # not JSON, too deep, a number too long to convert
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _flat(error["message"])
        if isinstance(error, str):
            return _flat(error)
    return _flat(text) or f"HTTP {status} with an empty body"


def _over_header_limits(exc: BaseException) -> bool:
    """Whether aiohttp refused a reply's head for edsb's limits: a line too long, or too many headers. aiohttp
    reports both as a `ClientResponseError` whose cause's cause is its parser's error."""
    from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, LineTooLong):
            return True
        if isinstance(seen, BadHttpMessage) and "too many headers" in str(seen.message).lower():
            return True
        seen = seen.__cause__
    return False


def _client_failure(exc: aiohttp.ClientError | OSError) -> AttemptFailure:
    """An aiohttp exception as a transport kind. `unreachable` only when no connection could be opened at all
    (it suggests a wrong address or a server that is down, and stops a sweep that meets it run after run);
    `connection` when one broke after opening or what came back was not HTTP."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientResponseError) and _over_header_limits(exc):
        limits = f"{MAX_RESPONSE_HEADERS} headers, {MAX_HEADER_LINE_BYTES:,} bytes a line"
        return AttemptFailure("oversized", f"the response's head is over edsb's limits ({limits}): {exc.message}")
    if isinstance(exc, aiohttp.ClientHttpProxyError):  # an https target's tunnel (CONNECT) refused by the proxy
        return AttemptFailure("unreachable", f"the proxy refused the tunnel (HTTP {exc.status} {exc.message})")
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, name resolution, TLS handshake or certificate
        return AttemptFailure("unreachable", _flat(f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser's verdict on the reply, not an HTTP status
        return AttemptFailure("connection", _flat(f"the reply is not valid HTTP: {exc.message}"))
    # ServerDisconnectedError, ClientPayloadError (a body cut short), ClientOSError (a reset), other OSErrors.
    return AttemptFailure("connection", _flat(f"{type(exc).__name__}: {exc or repr(exc)}"))


def _token_count(usage: dict[str, Any], name: str) -> int:
    """A usage field as a count: absent or null is 0; anything but a whole non-negative number is no completion."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKEN_COUNT:
        shown = one_line(to_json(value).decode("utf-8", "replace"), 40)
        raise AttemptFailure("invalid_response", f"usage.{name} is not a token count: {shown}")
    return value


def _load_body(body: bytes) -> Any:
    """The JSON of a body. pydantic-core's parser first (json.loads on bytes spends as long detecting the encoding);
    it refuses a lone surrogate escape (`"\\ud800"`), which JSON allows and the Python parser keeps, to be replaced
    where the reply's text enters edsb (`ChatResponse`) and noted in the result."""
    try:
        return from_json(body)
    except ValueError:
        try:
            return json.loads(body)
        except RecursionError:
            raise ValueError("nested too deeply") from None


def parse_completion(body: bytes, requested_model: str, latency_s: float, attempts: int) -> ChatResponse:
    """A ChatResponse from a completion body; `AttemptFailure` when the body is not a completion at all."""
    try:
        data = _load_body(body)
    except ValueError:
        snippet = one_line(body[: 4 * _SNIPPET].decode("utf-8", "replace"))
        raise AttemptFailure("invalid_response", f"body is not JSON: {snippet!r}") from None
    if not isinstance(data, dict):
        raise AttemptFailure("invalid_response", "body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        detail = f" (error: {one_line(to_json(error).decode('utf-8', 'replace'))})" if error else ""
        raise AttemptFailure("invalid_response", f"completion has no choices{detail}")
    first = choices[0]
    message = first.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    reported_model = data.get("model")
    return ChatResponse(
        text=content if isinstance(content, str) else "",
        prompt_tokens=_token_count(usage, "prompt_tokens"),
        completion_tokens=_token_count(usage, "completion_tokens"),
        latency_s=latency_s,
        model=reported_model if isinstance(reported_model, str) and reported_model else requested_model,
        finish_reason=first.get("finish_reason") if isinstance(first.get("finish_reason"), str) else None,
        attempts=attempts,
    )


def _refuse_https_proxy(scheme: str, host: str) -> None:
    """ValueError when the environment names an https:// proxy for this endpoint: aiohttp's `trust_env` would skip it
    with a logged warning and connect directly, which is not what the user asked for."""
    named = urllib.request.getproxies().get(scheme, "")
    if named.lower().startswith("https://") and not urllib.request.proxy_bypass(host):
        raise ValueError(f"the {scheme} proxy from the environment is https://: only http:// proxies are supported")


def _env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy for `url` as aiohttp's `trust_env` finds it (`HTTP_PROXY` / `HTTPS_PROXY` unless `NO_PROXY`
    exempts the host, credentials from the proxy URL or `~/.netrc`). With `trust_env` itself, aiohttp reads
    `~/.netrc` and the environment in a worker thread for every request; edsb asks once per model."""
    from aiohttp.helpers import get_env_proxy_for_url

    try:
        return get_env_proxy_for_url(url)
    except LookupError:  # no proxy for this scheme, or NO_PROXY exempts the host
        return None, None


def _check_header(name: str, value: str) -> None:
    """A value from the environment (a key) must not smuggle in a header or break the request."""
    if any(character in value for character in "\r\n\0") or not value.isprintable():
        raise ValueError(f"header {name!r} has a character HTTP does not allow")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header {name!r} has a character HTTP does not allow") from None


def tls_context() -> ssl.SSLContext:
    """The system's trust store as OpenSSL finds it now (so `SSL_CERT_FILE` / `SSL_CERT_DIR` apply), HTTP/1.1 by
    ALPN: what aiohttp builds once at import, built per model so a variable set after that import still counts."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        provider: Provider = OPENAI,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if max_response_bytes < 1:
            raise ValueError("max_response_bytes must be at least 1")
        self.model = model
        self.provider = provider
        self.base_url = resolve_base_url(base_url, provider, model)
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_in_flight = max_in_flight
        self.max_response_bytes = max_response_bytes
        self._api_key = resolve_api_key(self.base_url, api_key_env, provider, provider.url_for(model))
        self._headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"edsb/{__version__}",
        }
        # An address, proxy or key that cannot work is a usage error now, not a failure of every run.
        parts = urlsplit(self.base_url)
        try:
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("not an http(s) URL")
            parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in range
            _refuse_https_proxy(parts.scheme, parts.hostname)
            for name, value in self._headers.items():
                _check_header(name, value)
        except ValueError as exc:
            raise ModelSpecError(f"{self.base_url}: {exc}") from None
        # aiohttp (0.1-0.2 s to import) is imported with the first session, after `edsb run` has started the sandbox
        # pool; the URL and the proxy are resolved then, once.
        self._url: URL | None = None
        self._proxy: URL | None = None
        self._proxy_headers: dict[str, str] | None = None
        # Loading the trust store costs tens of milliseconds: only for https, once per model.
        self._tls: ssl.SSLContext | bool = tls_context() if parts.scheme == "https" else True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: aiohttp.ClientSession | None = None
        self._gate: asyncio.Semaphore | None = None
        self._reach = Reach()  # has any request reached the server (any HTTP response)?

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def identity(self) -> str:
        return f"{self.provider.name}:{self.model}@{self.base_url}"

    def _resolve(self) -> None:
        """The endpoint's URL, parsed once, and its proxy with the proxy's credentials, looked up once. They go on
        the tunnel's CONNECT for https, on each request for http (which aiohttp only does itself for its deprecated
        `proxy_auth`)."""
        from yarl import URL  # aiohttp's own URL type

        self._url = URL(self.base_url + CHAT_PATH)
        self._proxy, proxy_auth = _env_proxy(self._url)  # the environment does not change under a run
        if proxy_auth is not None and self._url.scheme == "https":
            self._proxy_headers = {"Proxy-Authorization": proxy_auth.encode()}
        elif proxy_auth is not None:
            self._headers["Proxy-Authorization"] = proxy_auth.encode()

    def _session(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        """The session and the in-flight limit of the running loop (connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._gate is None or self._loop is not loop:
            import aiohttp

            if self._url is None:
                self._resolve()

            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.max_in_flight, limit_per_host=self.max_in_flight, ssl=self._tls
                ),
                # The whole attempt is bounded by `timeout_s` (`_attempt`); aiohttp's own 5-minute default must not
                # cut a longer --timeout short.
                timeout=aiohttp.ClientTimeout(total=None),
                cookie_jar=aiohttp.DummyCookieJar(),  # an API server's cookies are never sent back
                trust_env=False,  # the proxy is looked up once (`_env_proxy`)
                max_line_size=MAX_HEADER_LINE_BYTES,
                max_field_size=MAX_HEADER_LINE_BYTES,
                max_headers=MAX_RESPONSE_HEADERS,
            )
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

    async def _read_body(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole body, or `oversized` as soon as it is announced or read past `max_response_bytes`: it is read a
        piece at a time (aiohttp stops reading the socket while its buffer is full), so an endless body never costs
        more memory than the limit. Decompressed bodies count as decompressed."""
        limit = self.max_response_bytes
        announced = response.content_length
        if announced is not None and announced > limit:
            response.close()
            raise AttemptFailure(
                "oversized", f"the response announces {announced:,} bytes, over the limit of {limit:,}"
            )
        pieces: list[bytes] = []
        size = 0
        while piece := await response.content.readany():
            size += len(piece)
            if size > limit:
                response.close()  # the rest is never read: the connection goes
                raise AttemptFailure("oversized", f"the response body goes on past the limit of {limit:,} bytes")
            pieces.append(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def _attempt(self, http: aiohttp.ClientSession, body: bytes) -> tuple[bytes, float]:
        import aiohttp

        assert self._url is not None  # resolved with the session

        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                async with http.post(
                    self._url,
                    data=body,
                    # Per request, not the session's default headers: aiohttp sends those to a proxy too, and turns
                    # `Authorization` (the key) into the proxy's `Proxy-Authorization`.
                    headers=self._headers,
                    allow_redirects=False,
                    proxy=self._proxy,
                    proxy_headers=self._proxy_headers,
                ) as response:
                    status = response.status
                    payload = await self._read_body(response)
        except TimeoutError:
            raise AttemptFailure("timeout", f"no complete response within {self.timeout_s:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _client_failure(exc) from exc
        self._reach.answered = True
        if not 200 <= status < 300:
            retry_after = retry_after_s(response.headers)
            raise AttemptFailure("http", error_message(payload, status), status=status, retry_after=retry_after)
        return payload, time.perf_counter() - started

    async def complete(self, request: ChatRequest) -> ChatResponse:
        http, gate = self._session()
        body = to_json(self._params(request))  # pydantic's serialiser: a third of `json.dumps`'s time

        async def attempt(number: int) -> ChatResponse:
            async with gate:
                payload, latency_s = await self._attempt(http, body)
            return parse_completion(payload, self.model, latency_s, number)

        return await send_with_retries(attempt, self.retry, self._reach, self._describe)

    def _describe(self, failure: AttemptFailure) -> str:
        message = one_line(self._redact(failure.message))
        if failure.status == 404:
            message += " (does --base-url end in /v1, and does the server serve this model name?)"
        return message

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key in error bodies; errors end up in transcripts and on screen."""
        return text.replace(self._api_key, "***") if self._api_key != KEYLESS_PLACEHOLDER else text

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.close()
        self._http = None
        self._gate = self._loop = None
