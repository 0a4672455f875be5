"""`anthropic:<model>` and `google:<model>`: Claude and Gemini through their official SDKs (extras `anthropic`,
`google`), with every request built as the official implementation builds it.

- Anthropic (Messages API): the system message goes apart as `system`, the other turns as they are,
  `max_tokens` (2,048 unless `--max-tokens`), the temperature; no JSON mode (the API has none) and no seed.
- Google (google-genai): a chat whose history is every turn but the last, which is then sent; `system_instruction`,
  `max_output_tokens` (2,048 unless `--max-tokens`), the temperature, and `response_mime_type` `application/json`
  when the Narrator asks for JSON; `seed` only with `--model-seed`.

The SDKs build, send and parse; edsb keeps what makes every remote model fail alike: the SDKs' own retries are off
and the one retry loop of `retry.py` runs instead (with `Retry-After`, Anthropic's `anthropic-ratelimit-*-reset`
and Gemini's RetryInfo), each attempt is bounded by `--timeout` and the in-flight limit, and every failure becomes
one of the `TransportError` kinds. Both SDKs send over httpx2; edsb hands them a client whose transport refuses a
body over `max_response_bytes` (announced or read) with the same `oversized` error as the aiohttp client, and which
takes the environment's proxy and the system's trust store as that client does.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from edsb.llm.errors import ModelSpecError, ProviderSdkError
from edsb.llm.openai_client import error_message
from edsb.llm.protocol import ChatRequest, ChatResponse, Message
from edsb.llm.providers import PROVIDERS, Provider
from edsb.llm.remote import ProxyRoute, RemoteChatModel, one_line, tls_context, token_count
from edsb.llm.retry import AttemptFailure, retry_after_s

if TYPE_CHECKING:
    import httpx2

# The hosts the SDKs address when no --base-url is given (part of the model identity).
ANTHROPIC_URL = "https://api.anthropic.com"
GOOGLE_URL = "https://generativelanguage.googleapis.com"
_TOKEN_LIMIT = 2**53
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


def _split_system(messages: tuple[Message, ...]) -> tuple[str | None, list[Message]]:
    """The leading system message apart from the turns, as both APIs take it."""
    if messages and messages[0].role == "system":
        return messages[0].content, list(messages[1:])
    return None, list(messages)


class SdkChatModel(RemoteChatModel):
    """What the two SDK models share: the httpx2 client per event loop that carries the SDK's requests."""

    default_url = ""
    not_found_hint = "does the provider serve this model name, and does --base-url name its host?"

    def __init__(self, model: str, provider: Provider, *, base_url: str | None = None, **options: Any) -> None:
        url = (base_url or self.default_url).strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelSpecError(f"{url}: not an http(s) URL")
        super().__init__(model, provider, url, default_url=self.default_url, **options)
        if any(character in self._api_key for character in "\r\n\0") or not self._api_key.isprintable():
            raise ModelSpecError(f"{self.base_url}: the API key has a character HTTP does not allow")
        self._sdk()  # the extra is missing: say so now, not at the first request
        self.proxy()
        self._http: httpx2.AsyncClient | None = None

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
        return self._sdk_failure(exc) or _transport_failure(exc)


def _status_failure(status: int, body: bytes, retry_after: float | None) -> AttemptFailure:
    return AttemptFailure("http", error_message(body, status), status=status, retry_after=retry_after)


class AnthropicChatModel(SdkChatModel):
    """Claude through `anthropic.AsyncAnthropic`'s Messages API."""

    default_url = ANTHROPIC_URL

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, PROVIDERS["anthropic"], **options)

    def _sdk(self) -> Any:
        try:
            import anthropic
        except ImportError:
            raise ProviderSdkError("anthropic: models need the SDK: pip install 'edsb[anthropic]'") from None
        return anthropic

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        return self._sdk().AsyncAnthropic(
            api_key=self._api_key, base_url=self.base_url, http_client=http, max_retries=0
        )

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create`, as the reference passes them."""
        system, turns = _split_system(request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": message.role, "content": message.content} for message in turns],
            "max_tokens": request.max_tokens or self.provider.max_tokens,
        }
        if system is not None:
            params["system"] = system
        # The SDK's signature no longer names the sampling settings (newer models refuse them); the API still takes
        # them for the models that do, and the reference sends the temperature: they go in the body as they are.
        sampling = {"temperature": request.temperature, "top_p": request.top_p}
        if any(value is not None for value in sampling.values()):
            params["extra_body"] = {name: value for name, value in sampling.items() if value is not None}
        return params

    def _prepare(self, request: ChatRequest) -> dict[str, Any]:
        return self.params(request)

    async def _send(self, client: Any, prepared: dict[str, Any]) -> tuple[Any, float]:
        started = time.perf_counter()
        message = await client.messages.create(**prepared)
        return message, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, request: ChatRequest) -> ChatResponse:
        content = getattr(result, "content", None)
        usage = getattr(result, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise AttemptFailure("invalid_response", "the reply is not a message (no content or usage)")
        # The reference reads the first block; a reply without text blocks is an empty answer.
        texts = [block.text for block in content if getattr(block, "type", None) == "text"]
        model = getattr(result, "model", None)
        stop = getattr(result, "stop_reason", None)
        return ChatResponse(
            text=texts[0] if texts and isinstance(texts[0], str) else "",
            prompt_tokens=token_count(getattr(usage, "input_tokens", None), "usage.input_tokens"),
            completion_tokens=token_count(getattr(usage, "output_tokens", None), "usage.output_tokens"),
            latency_s=latency_s,
            model=model if isinstance(model, str) and model else self.model,
            finish_reason=stop if isinstance(stop, str) else None,
            attempts=attempts,
        )

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        anthropic = self._sdk()
        if isinstance(exc, anthropic.APIStatusError):
            response = exc.response
            headers = response.headers
            return _status_failure(response.status_code, response.content, retry_after_s(headers))
        if isinstance(exc, anthropic.APIResponseValidationError | json.JSONDecodeError):
            return AttemptFailure("invalid_response", one_line(f"the reply is not a message: {exc}"))
        return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")


def _retry_info_s(details: Any) -> float | None:
    """Gemini's `google.rpc.RetryInfo` (`"retryDelay": "30s"`) from an error body, if it has one."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.fullmatch(str(detail.get("retryDelay", "")))
            if match:
                return float(match[1])
    return None


class GoogleChatModel(SdkChatModel):
    """Gemini through `google.genai.Client(...).aio.chats`."""

    default_url = GOOGLE_URL

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, PROVIDERS["google"], **options)

    def _sdk(self) -> Any:
        try:
            from google import genai
        except ImportError:
            raise ProviderSdkError("google: models need the SDK: pip install 'edsb[google]'") from None
        return genai

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        types = self._sdk().types
        options = types.HttpOptions(
            base_url=self.base_url,
            httpx_async_client=http,
            retry_options=types.HttpRetryOptions(attempts=1),  # edsb's retry loop decides
        )
        # The Gemini API, never Vertex AI, whatever GOOGLE_GENAI_USE_VERTEXAI says: the key is a Gemini API key.
        return self._sdk().Client(api_key=self._api_key, vertexai=False, http_options=options)

    def chat_arguments(self, request: ChatRequest) -> tuple[dict[str, Any], str]:
        """The arguments of `chats.create` and the message then sent, as the reference builds them."""
        types = self._sdk().types
        system, turns = _split_system(request.messages)
        history = [
            types.Content(role="user" if message.role == "user" else "model", parts=[types.Part(text=message.content)])
            for message in turns[:-1]
        ]
        config: dict[str, Any] = {
            "system_instruction": system,
            "temperature": request.temperature,
            "max_output_tokens": request.max_tokens or self.provider.max_tokens,
            "response_mime_type": "application/json" if request.json_mode else None,
        }
        if request.top_p is not None:
            config["top_p"] = request.top_p
        if request.seed is not None:
            config["seed"] = request.seed
        arguments = {"model": self.model, "history": history, "config": types.GenerateContentConfig(**config)}
        return arguments, turns[-1].content if turns else ""

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], str]:
        return self.chat_arguments(request)

    async def _send(self, client: Any, prepared: tuple[dict[str, Any], str]) -> tuple[Any, float]:
        arguments, last = prepared
        started = time.perf_counter()
        chat = client.aio.chats.create(**arguments)
        response = await chat.send_message(last)
        return response, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, request: ChatRequest) -> ChatResponse:
        candidates = getattr(result, "candidates", None)
        if not candidates:
            feedback = getattr(result, "prompt_feedback", None)
            detail = f" ({one_line(str(feedback))})" if feedback else ""
            raise AttemptFailure("invalid_response", f"the reply has no candidates{detail}")
        usage = getattr(result, "usage_metadata", None)
        finish = getattr(candidates[0], "finish_reason", None)
        parts = getattr(getattr(candidates[0], "content", None), "parts", None) or []
        text = "".join(part.text for part in parts if isinstance(getattr(part, "text", None), str))
        version = getattr(result, "model_version", None)
        return ChatResponse(
            text=text,
            prompt_tokens=token_count(getattr(usage, "prompt_token_count", None), "usageMetadata.promptTokenCount"),
            completion_tokens=token_count(
                getattr(usage, "candidates_token_count", None), "usageMetadata.candidatesTokenCount"
            ),
            latency_s=latency_s,
            model=version if isinstance(version, str) and version else self.model,
            finish_reason=getattr(finish, "value", finish) if finish is not None else None,
            attempts=attempts,
        )

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            response = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            wait = retry_after_s(headers)
            if wait is None:
                wait = _retry_info_s(exc.details)
            body = json.dumps(exc.details).encode() if exc.details is not None else str(exc).encode()
            return _status_failure(int(exc.code or 0), body, wait)
        if isinstance(exc, ValueError):  # a body that is not JSON, or not a response
            return AttemptFailure("invalid_response", one_line(f"the reply is not a response: {exc}"))
        return None
