"""`anthropic:<model>` and `google:<model>`: Claude and Gemini through their official SDKs (extras `anthropic`,
`google`), with every request built as the official implementation builds it, in the API's dialect of today: what
is sent and how the reply reads is the provider's (`providers.anthropic`, `providers.google`).

The SDKs build, send and parse; edsb keeps what makes every remote model fail alike: the SDKs' own retries are off
and the one retry loop of `retry.py` runs instead (with `Retry-After`, Anthropic's `anthropic-ratelimit-*-reset`
and Gemini's RetryInfo), each attempt is bounded by `--timeout` and the in-flight limit, and every failure becomes
one of the `TransportError` kinds. Both SDKs send over httpx2; edsb hands them a client whose transport refuses a
body over `max_response_bytes` (announced or read) with the same `oversized` error as the aiohttp client, and which
takes the environment's proxy and the system's trust store as that client does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from edsb.llm import cloud
from edsb.llm.errors import ModelSpecError, ProviderSdkError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.providers import PROVIDERS, Provider
from edsb.llm.providers import anthropic as claude
from edsb.llm.providers import google as gemini
from edsb.llm.refusals import read_error
from edsb.llm.remote import KEYLESS_PLACEHOLDER, ProxyRoute, RemoteChatModel, one_line, tls_context
from edsb.llm.retry import AttemptFailure, retry_after_s

if TYPE_CHECKING:
    import httpx2

# The hosts the SDKs address when no --base-url is given (part of the model identity).
ANTHROPIC_URL = "https://api.anthropic.com"
GOOGLE_URL = "https://generativelanguage.googleapis.com"
HEAD_LIMIT = 100 * 1024  # what httpcore's HTTP/1.1 parser holds of a response head


class ResponseTooLarge(Exception):
    """Raised by the transport: the SDK passes it on (or wraps it), and edsb reports it as `oversized`."""


def _limited_transport(limit: int, proxy: ProxyRoute | None, max_in_flight: int) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport that refuses a response body over `limit` bytes, announced or as read (decompressed
    bodies count as decompressed, where the SDK reads them)."""
    import httpx2

    class _Limited(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            async for piece in self.inner:
                size += len(piece)
                if size > limit:
                    raise ResponseTooLarge(f"the response body goes on past the limit of {limit:,} bytes")
                yield piece

        async def aclose(self) -> None:
            await self.inner.aclose()

    class _Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            limits = httpx2.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight)
            route = None if proxy is None else httpx2.Proxy(proxy.url, auth=proxy.auth)
            self.inner = httpx2.AsyncHTTPTransport(verify=tls_context(), proxy=route, limits=limits)

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self.inner.handle_async_request(request)
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > limit:
                await response.aclose()
                raise ResponseTooLarge(f"the response announces {int(announced):,} bytes, over the limit of {limit:,}")
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            return httpx2.Response(
                response.status_code,
                headers=response.headers,
                stream=_Limited(response.stream),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    return _Transport()


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _transport_failure(exc: BaseException) -> AttemptFailure | None:
    """An httpx2 failure anywhere in the exception's chain as a transport kind, as the aiohttp client sorts its own:
    `unreachable` when no connection opened, `connection` when one broke, `oversized` past the body limit."""
    import httpx2

    for error in _chain(exc):
        if isinstance(error, ResponseTooLarge):
            return AttemptFailure("oversized", str(error))
        if isinstance(error, httpx2.TimeoutException):
            return AttemptFailure("timeout", f"{type(error).__name__}: {error}")
        if isinstance(error, httpx2.RemoteProtocolError) and "buffer too long" in str(error).lower():
            # h11 refuses a response head over its 100 KiB (the aiohttp client's limit is 128 lines of 8,190 bytes)
            return AttemptFailure("oversized", f"the response's head is over the limit of {HEAD_LIMIT:,} bytes")
        if isinstance(error, httpx2.ConnectError | httpx2.ProxyError | httpx2.UnsupportedProtocol):
            return AttemptFailure("unreachable", one_line(f"{type(error).__name__}: {error}"))
        if isinstance(error, httpx2.TransportError | httpx2.DecodingError):
            return AttemptFailure("connection", one_line(f"{type(error).__name__}: {error or repr(error)}"))
    return None


class SdkChatModel(RemoteChatModel):
    """What the two SDK models share: the httpx2 client per event loop that carries the SDK's requests."""

    default_url = ""
    not_found_hint = "does the provider serve this model name, and does --base-url name its host?"

    def __init__(self, model: str, provider: Provider, *, base_url: str | None = None, **options: Any) -> None:
        if provider.cloud is not None:  # the cloud's region and project decide its address (`llm.cloud`)
            self._place = cloud.place(provider)
            self.default_url = self._place.default_url
            base_url = base_url or cloud.override_url(provider)
        url = (base_url or self.default_url).strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelSpecError(f"{url}: not an http(s) URL")
        super().__init__(model, provider, url, default_url=self.default_url, **options)
        if any(character in self._api_key for character in "\r\n\0") or not self._api_key.isprintable():
            raise ModelSpecError(f"{self.base_url}: the API key has a character HTTP does not allow")
        self._sdk()  # the extra is missing: say so now, not at the first request
        self._secret = self._cloud_secret() if provider.cloud is not None else None
        self.proxy()
        self._http: httpx2.AsyncClient | None = None

    def _cloud_secret(self) -> Any:
        """What a cloud route signs with, found now so that a missing one is an error before any request: the token
        given (a Bedrock API key, a Vertex AI access token), else the cloud's own credentials (boto3's, which the
        SDK signs with; Google's application default credentials)."""
        token = None if self._api_key == KEYLESS_PLACEHOLDER else self._api_key
        if self.provider.cloud == "vertex":
            return cloud.google_credentials(self.provider, token)
        if token is None:
            cloud.check_aws_credentials(self.provider, self._place.region)
        return token

    def _sdk(self) -> Any:
        raise NotImplementedError

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        raise NotImplementedError

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        raise NotImplementedError

    def _open(self) -> Any:
        import httpx2

        transport = _limited_transport(self.max_response_bytes, self.proxy(), self.max_in_flight)
        # The whole attempt is bounded by `timeout_s` (asyncio.timeout); httpx2's own must not cut it shorter.
        self._http = httpx2.AsyncClient(transport=transport, timeout=None, trust_env=False, follow_redirects=False)
        return self._make_client(self._http)

    async def _shut(self, session: Any) -> None:
        if self._http is not None:
            await self._http.aclose()
        self._http = None

    def _failure(self, exc: Exception) -> AttemptFailure | None:
        cloud_failure = cloud.credential_failure(exc) if self.provider.cloud == "vertex" else None
        return cloud_failure or self._sdk_failure(exc) or _transport_failure(exc)


def status_failure(status: int, body: bytes, retry_after: float | None) -> AttemptFailure:
    """An HTTP status with the server's refusal as its body words it."""
    return AttemptFailure.http(status, read_error(body, status), retry_after)


class AnthropicChatModel(SdkChatModel):
    """Claude through `anthropic.AsyncAnthropic`'s Messages API."""

    default_url = ANTHROPIC_URL

    def __init__(
        self, model: str, provider: Provider = PROVIDERS["anthropic"], *, prompt_cache: bool = True, **options: Any
    ) -> None:
        super().__init__(model, provider, **options)
        self.prompt_cache = prompt_cache  # mark the shared prefix for Anthropic's prompt cache

    def _sdk(self) -> Any:
        try:
            import anthropic
        except ImportError:
            extra = self.provider.extra
            raise ProviderSdkError(f"{self.provider.name}: models need the SDK: pip install 'edsb[{extra}]'") from None
        return anthropic

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        if self.provider.cloud is not None:
            return cloud.anthropic_client(self._sdk(), self.provider, self._place, self.base_url, http, self._secret)
        return self._sdk().AsyncAnthropic(
            api_key=self._api_key, base_url=self.base_url, http_client=http, max_retries=0
        )

    def api_version(self) -> str:
        """The Messages API version the installed SDK speaks (its `anthropic-version` header)."""
        return claude.api_version()

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create` (`providers.anthropic.messages_body`)."""
        return claude.messages_body(self.provider, self.model, request, prompt_cache=self.prompt_cache)

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        params = self.params(request)
        return params, claude.messages_sent(params, prompt_cache=self.prompt_cache)

    async def _send(self, client: Any, prepared: tuple[dict[str, Any], Any]) -> tuple[Any, float]:
        started = time.perf_counter()
        message = await client.messages.create(**prepared[0])
        return message, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        return claude.read_message(result, self.model, latency_s, attempts, prepared[1])

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        anthropic = self._sdk()
        if isinstance(exc, anthropic.APIStatusError):
            response = exc.response
            headers = response.headers
            return status_failure(response.status_code, response.content, retry_after_s(headers))
        if isinstance(exc, anthropic.APIResponseValidationError | json.JSONDecodeError):
            return AttemptFailure("invalid_response", one_line(f"the reply is not a message: {exc}"))
        return None


class GoogleChatModel(SdkChatModel):
    """Gemini through `google.genai.Client(...).aio.chats`."""

    default_url = GOOGLE_URL

    def __init__(self, model: str, provider: Provider = PROVIDERS["google"], **options: Any) -> None:
        super().__init__(model, provider, **options)

    def _sdk(self) -> Any:
        try:
            from google import genai
        except ImportError:
            extra = self.provider.extra
            raise ProviderSdkError(f"{self.provider.name}: models need the SDK: pip install 'edsb[{extra}]'") from None
        return genai

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        if self.provider.cloud is not None:
            return cloud.genai_client(self._sdk(), self._place, self.base_url, http, self._secret)
        types = self._sdk().types
        options = types.HttpOptions(
            base_url=self.base_url,
            httpx_async_client=http,
            retry_options=types.HttpRetryOptions(attempts=1),  # edsb's retry loop decides
        )
        # The Gemini API, never Vertex AI, whatever GOOGLE_GENAI_USE_VERTEXAI says: the key is a Gemini API key.
        return self._sdk().Client(api_key=self._api_key, vertexai=False, http_options=options)

    def thinking_model(self) -> bool:
        """Gemini 2.5 and 3 think before they answer, by default, within the same output cap."""
        return gemini.thinking_model(self.model)

    def thinking(self, request: ChatRequest) -> tuple[dict[str, Any] | None, int]:
        """The `thinking_config` to send and the room it needs (`providers.google.thinking`)."""
        return gemini.thinking(self.model, request)

    def chat_arguments(self, request: ChatRequest) -> tuple[dict[str, Any], str]:
        """The arguments of `chats.create` and the message then sent (`providers.google.chat_arguments`)."""
        return gemini.chat_arguments(self.provider, self._sdk().types, self.model, request)

    def _prepare(self, request: ChatRequest) -> tuple[tuple[dict[str, Any], str], dict[str, Any]]:
        arguments, last = self.chat_arguments(request)
        sent = arguments["config"].model_dump(mode="json", by_alias=True, exclude_none=True)
        sent.pop("systemInstruction", None)
        return (arguments, last), sent

    async def _send(self, client: Any, prepared: tuple[tuple[dict[str, Any], str], Any]) -> tuple[Any, float]:
        arguments, last = prepared[0]
        started = time.perf_counter()
        chat = client.aio.chats.create(**arguments)
        response = await chat.send_message(last)
        return response, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        return gemini.read_reply(result, self.model, latency_s, attempts, prepared[1])

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            response = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            wait = retry_after_s(headers)
            if wait is None:
                wait = gemini.retry_info_s(exc.details)
            body = json.dumps(exc.details).encode() if exc.details is not None else str(exc).encode()
            return status_failure(int(exc.code or 0), body, wait)
        if isinstance(exc, ValueError):  # a body that is not JSON, or not a response
            return AttemptFailure("invalid_response", one_line(f"the reply is not a response: {exc}"))
        return None
