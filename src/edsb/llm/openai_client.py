"""`openai:<model>` and the other OpenAI-compatible providers (`deepinfra`, `openrouter`, `deepseek`, `xai`, `ollama`,
...): any server that speaks the OpenAI chat completions API, over aiohttp. What is sent and how the usage reads is
the provider's (`providers.openai.chat_body`, `billed_usage`); the reply is split into reasoning and answer
(`reasoning`).

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

import json
import os
import ssl
import time
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic_core import from_json, to_json

from edsb import __version__
from edsb.llm.errors import ModelSpecError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.providers import OPENAI_URL, PROVIDERS, Provider
from edsb.llm.providers.base import BearerSource
from edsb.llm.providers.openai import billed_usage, chat_body
from edsb.llm.reasoning import split_message
from edsb.llm.refusals import ServerError, read_error
from edsb.llm.remote import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_S,
    KEYLESS_PLACEHOLDER,
    SNIPPET_CHARS,
    RemoteChatModel,
    flat,
    one_line,
    resolve_api_key,
    tls_context,
)
from edsb.llm.retry import AttemptFailure, retry_after_s

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "KEYLESS_PLACEHOLDER",
    "OpenAIChatModel",
    "error_message",
    "one_line",
    "parse_completion",
    "resolve_api_key",
    "resolve_base_url",
]

OPENAI = PROVIDERS["openai"]
DEFAULT_BASE_URL = OPENAI_URL
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = OPENAI.key_env
CHAT_PATH = "/chat/completions"
# The limits of a reply's head: aiohttp's parser limits, set here so that the documented values do not move with
# aiohttp's defaults (the body's limit has an option, `--max-response-mb`).
MAX_RESPONSE_HEADERS = 128
MAX_HEADER_LINE_BYTES = 8190

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL


def resolve_base_url(base_url: str | None = None, provider: Provider = OPENAI, model: str = "") -> str:
    """`--base-url`, else (for `openai:` only) `$OPENAI_BASE_URL`, else the provider's host; without a trailing slash
    so one server has one identity."""
    named = BASE_URL_ENV if provider is OPENAI else provider.base_url_env
    url = base_url or (os.environ.get(named) if named else None) or provider.url_for(model) or ""
    if not url.strip():
        raise ModelSpecError(f"{provider.name}: set {named} to the endpoint, or pass --base-url")
    return url.strip().rstrip("/")


def error_message(body: bytes, status: int) -> str:
    """The server's own words for a failed request, in whichever provider's shape (`refusals.read_error`)."""
    return read_error(body, status).message


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
        return AttemptFailure("unreachable", flat(f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser's verdict on the reply, not an HTTP status
        return AttemptFailure("connection", flat(f"the reply is not valid HTTP: {exc.message}"))
    # ServerDisconnectedError, ClientPayloadError (a body cut short), ClientOSError (a reset), other OSErrors.
    return AttemptFailure("connection", flat(f"{type(exc).__name__}: {exc or repr(exc)}"))


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


def parse_completion(
    body: bytes, requested_model: str, latency_s: float, attempts: int, sent: dict[str, Any] | None = None
) -> ChatResponse:
    """A ChatResponse from a completion body; `AttemptFailure` when the body is not a completion at all. The reply is
    split into reasoning and answer (`reasoning.split_message`); a refusal is kept as such."""
    try:
        data = _load_body(body)
    except ValueError:
        snippet = one_line(body[: 4 * SNIPPET_CHARS].decode("utf-8", "replace"))
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
    message = message if isinstance(message, dict) else {}
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    reported_model = data.get("model")
    refusal = message.get("refusal")
    return ChatResponse(
        **split_message(message).fields(),
        **billed_usage(usage),
        latency_s=latency_s,
        model=reported_model if isinstance(reported_model, str) and reported_model else requested_model,
        finish_reason=first.get("finish_reason") if isinstance(first.get("finish_reason"), str) else None,
        attempts=attempts,
        refusal=refusal if isinstance(refusal, str) and refusal else None,
        sent=sent or {},
    )


def _refuse_https_proxy(scheme: str, host: str) -> None:
    """ValueError when the environment names an https:// proxy for this endpoint: aiohttp's `trust_env` would skip it
    with a logged warning and connect directly, which is not what the user asked for."""
    named = urllib.request.getproxies().get(scheme, "")
    if named.lower().startswith("https://") and not urllib.request.proxy_bypass(host):
        raise ValueError(f"the {scheme} proxy from the environment is https://: only http:// proxies are supported")


def _check_header(name: str, value: str) -> None:
    """A value from the environment (a key) must not smuggle in a header or break the request."""
    if any(character in value for character in "\r\n\0") or not value.isprintable():
        raise ValueError(f"header {name!r} has a character HTTP does not allow")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header {name!r} has a character HTTP does not allow") from None


class OpenAIChatModel(RemoteChatModel):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint, over aiohttp.

    `window_note`: set once the server (Ollama) counted far fewer prompt tokens than were sent
    (`Provider.cut_note`); `on_note`, if set, is told it then, once."""

    not_found_hint = "does --base-url end in /v1, and does the server serve this model name?"

    def __init__(self, model: str, *, base_url: str | None = None, provider: Provider = OPENAI, **options: Any) -> None:
        url = resolve_base_url(base_url, provider, model)
        own = provider.url_for(model) or os.environ.get(provider.base_url_env or "", "").strip().rstrip("/")
        super().__init__(model, provider, url, default_url=own or DEFAULT_BASE_URL, **options)
        self.window_note: str | None = None
        self.on_note: Callable[[str], None] | None = None
        # No key given: a sign-in (Entra ID at an Azure resource) puts its token on each request instead.
        self._sign_in: BearerSource | None = (
            provider.sign_in(self.base_url) if self._api_key == KEYLESS_PLACEHOLDER else None
        )
        key = {provider.key_header: self._api_key} if provider.key_header else {}
        self._headers = {
            **({} if self._sign_in else key or {"Authorization": f"Bearer {self._api_key}"}),
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
        self._proxy_url: URL | None = None
        self._proxy_headers: dict[str, str] | None = None
        # Loading the trust store costs tens of milliseconds: only for https, once per model.
        self._tls: ssl.SSLContext | bool = tls_context() if parts.scheme == "https" else True

    def api_version(self) -> str | None:
        """The `api-version` query the host asks for (Azure's), from its variable else its default; None: none."""
        named = self.provider.api_version_env
        return (os.environ.get(named) if named else None) or self.provider.api_version

    def _resolve(self) -> None:
        """The endpoint's URL, parsed once, and its proxy with the proxy's credentials. They go on the tunnel's
        CONNECT for https, on each request for http (which aiohttp only does itself for its deprecated
        `proxy_auth`)."""
        import aiohttp
        from yarl import URL  # aiohttp's own URL type

        url = URL(self.base_url + self.provider.chat_path.format(model=self.model))
        version = self.api_version()
        self._url = url if version is None else url.with_query({"api-version": version})
        route = self.proxy()
        if route is None:
            return
        self._proxy_url = URL(route.url)
        if route.auth is not None:
            credentials = aiohttp.encode_basic_auth(*route.auth, encoding="latin1")
            if self._url.scheme == "https":
                self._proxy_headers = {"Proxy-Authorization": credentials}
            else:
                self._headers["Proxy-Authorization"] = credentials

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._url is None:
            self._resolve()
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_in_flight, limit_per_host=self.max_in_flight, ssl=self._tls),
            # The whole attempt is bounded by `timeout_s`; aiohttp's own 5-minute default must not cut a longer
            # --timeout short.
            timeout=aiohttp.ClientTimeout(total=None),
            cookie_jar=aiohttp.DummyCookieJar(),  # an API server's cookies are never sent back
            trust_env=False,  # the proxy is looked up once (`RemoteChatModel.proxy`)
            max_line_size=MAX_HEADER_LINE_BYTES,
            max_field_size=MAX_HEADER_LINE_BYTES,
            max_headers=MAX_RESPONSE_HEADERS,
        )

    async def _shut(self, session: aiohttp.ClientSession) -> None:
        await session.close()

    def _prepare(self, request: ChatRequest) -> tuple[bytes, dict[str, Any]]:
        params = self.params(request)
        version = self.api_version()
        sent = {} if version is None else {"api-version": version}
        sent.update((name, value) for name, value in params.items() if name not in ("model", "messages"))
        return to_json(params), sent  # pydantic's serialiser: a third of `json.dumps`'s time

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The body of the request, as the provider builds it (`providers.openai.chat_body`)."""
        return chat_body(self.provider, self.model, request)

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

    async def _send(self, session: aiohttp.ClientSession, prepared: tuple[bytes, Any]) -> tuple[bytes, float]:
        assert self._url is not None  # resolved with the session
        started = time.perf_counter()
        headers = self._headers if self._sign_in is None else {**self._headers, "Authorization": await self._signed()}
        async with session.post(
            self._url,
            data=prepared[0],
            # Per request, not the session's default headers: aiohttp sends those to a proxy too, and turns
            # `Authorization` (the key) into the proxy's `Proxy-Authorization`.
            headers=headers,
            allow_redirects=False,
            proxy=self._proxy_url,
            proxy_headers=self._proxy_headers,
        ) as response:
            status = response.status
            payload = await self._read_body(response)
        self._reach.answered = True
        if not 200 <= status < 300:
            retry_after = retry_after_s(response.headers)
            raise AttemptFailure.http(status, read_error(payload, status), retry_after)
        return payload, time.perf_counter() - started

    async def _signed(self) -> str:
        """The sign-in's `Authorization` header; a sign-in that fails refuses the client, as a bad key would."""
        assert self._sign_in is not None
        try:
            value = await self._sign_in.header()
            _check_header("Authorization", value)
        except Exception as exc:  # the credential's own errors, whichever library raised them
            key = f"or export {self.provider.key_env}, or name a key variable with --api-key-env"
            fix = f"no Microsoft Entra ID token for {self.provider.name}: sign in (az login, a managed identity) {key}"
            raise AttemptFailure.http(401, ServerError(flat(f"{fix}; {type(exc).__name__}: {exc}")), None) from None
        return value

    def _parse(self, payload: bytes, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        response = parse_completion(payload, self.model, latency_s, attempts, prepared[1])
        if self.window_note is None:
            self.window_note = self.provider.cut_note(self.base_url, response.prompt_tokens, len(prepared[0]))
            if self.window_note is not None and self.on_note is not None:
                self.on_note(self.window_note)  # said when first seen; the run repeats it at its end
        return response

    def _failure(self, exc: Exception) -> AttemptFailure | None:
        import aiohttp

        return _client_failure(exc) if isinstance(exc, aiohttp.ClientError | OSError) else None


def window_note_of(model: object) -> str | None:
    """The note of a model (or of the one a response cache wraps) whose server cut its prompts (`window_note`)."""
    inner = getattr(model, "inner", model)
    return inner.window_note if isinstance(inner, OpenAIChatModel) else None


def tell_window_note(model: object, say: Callable[[str], None]) -> None:
    """Have `say` told, once, when a model's server (or the one a response cache wraps) is first seen cutting its
    prompts (`window_note`)."""
    inner = getattr(model, "inner", model)
    if isinstance(inner, OpenAIChatModel):
        inner.on_note = say
