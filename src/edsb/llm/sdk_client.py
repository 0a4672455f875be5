"""`anthropic:<model>` and `google:<model>`: Claude and Gemini through their official SDKs (extras `anthropic`,
`google`), with every request built as the official implementation builds it, in the API's dialect of today.

- Anthropic (Messages API): the system message goes apart as `system`, the other turns as they are, `max_tokens`
  (2,048 unless `--max-tokens`, plus the thinking budget or adaptive thinking's room); the temperature only where
  the installed SDK's API version has one (2026-10-21 has none); `thinking` and `output_config.effort` when asked
  for (an effort turns on adaptive thinking on Claude 4.6 and later); no JSON mode (the API
  has none) and no seed. Thinking and redacted-thinking blocks are the reasoning; the first text block the answer.
- Google (google-genai): a chat whose history is every turn but the last, which is then sent; `system_instruction`,
  `max_output_tokens` (the answer's 2,048 unless `--max-tokens`, plus room for a thinking model's thinking), the
  temperature when given, `response_mime_type` `application/json` when the Narrator asks for JSON, a thinking budget
  or level when given; `seed` only with `--model-seed`. Thought parts are the reasoning, and their tokens are output.

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

from edsb.llm import cloud
from edsb.llm.errors import ModelSpecError, ProviderSdkError, TransportError
from edsb.llm.protocol import ChatRequest, ChatResponse, Message
from edsb.llm.providers import PROVIDERS, Provider, anthropic_api, claude_adaptive
from edsb.llm.reasoning import REDACTED, Split, split_think
from edsb.llm.refusals import ServerError, read_error, refusal_fix
from edsb.llm.remote import (
    KEYLESS_PLACEHOLDER,
    ProxyRoute,
    RemoteChatModel,
    carried,
    one_line,
    tls_context,
    token_count,
)
from edsb.llm.retry import AttemptFailure, retry_after_s

if TYPE_CHECKING:
    import httpx2

# Gemini models that think by default, within the output cap; the room their thinking gets on top of the answer's
# unless a budget is given: the largest thinking budget Gemini 2.5 Pro takes, so thinking never cuts an answer short.
THINKING_GEMINI = ("gemini-2.5", "gemini-3")
THINKING_ROOM = 32_768
# Gemini's finish reasons that stop a candidate for safety or policy: the model's refusal.
SAFETY_STOPS = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "RECITATION"})
# The hosts the SDKs address when no --base-url is given (part of the model identity).
ANTHROPIC_URL = "https://api.anthropic.com"
GOOGLE_URL = "https://generativelanguage.googleapis.com"
_TOKEN_LIMIT = 2**53
# The room Claude's adaptive thinking gets on top of the answer's, as a thinking budget would: its thinking shares
# `max_tokens` with the answer, so without room it could cut the answer short.
ADAPTIVE_ROOM = 16_384
# Anthropic's prompt-cache breakpoint (the 5-minute lifetime, written at 1.25 times the input price).
EPHEMERAL = {"type": "ephemeral"}
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
        api = anthropic_api()
        return api[0] if api is not None else "unknown"

    def _takes(self, name: str) -> bool:
        """Whether the installed SDK's `messages.create` takes `name` (the API version's parameters)."""
        api = anthropic_api()
        return api is not None and name in api[1]

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create`: the system message apart, the turns as they are, `max_tokens`
        the answer's room plus any thinking budget; thinking and effort when asked for. The sampling settings go only
        where the installed SDK's API version has them (its request type names them): version 2026-10-21 has none,
        and `sent` records that none went. No JSON mode (the API has none) and no seed."""
        system, turns = _split_system(request.messages)
        budget = request.thinking_budget
        room = request.max_tokens or self.provider.max_tokens or 0
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": message.role, "content": message.content} for message in turns],
            "max_tokens": room + (budget or 0),
        }
        if system is not None:
            params["system"] = system
        if self.prompt_cache:
            _mark_shared_prefix(params)
        for name, value in (("temperature", request.temperature), ("top_p", request.top_p)):
            if value is not None and self._takes(name):  # never what the API version lacks (`sent` shows it)
                params[name] = value
        if request.thinking_level is not None:
            raise TransportError(
                "rejected",
                f"Anthropic's Messages API version {self.api_version()} has no thinking level",
                attempts=0,
                fix="it takes --thinking-budget and --reasoning-effort: drop --thinking-level",
            )
        if budget is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"}
        if request.reasoning_effort is not None:
            params["output_config"] = {"effort": request.reasoning_effort}
            if budget is None and claude_adaptive(self.model):  # the effort sets how deep it thinks
                params["thinking"] = {"type": "adaptive", "display": "summarized"}  # its thinking kept as reasoning
                params["max_tokens"] += ADAPTIVE_ROOM
        return params

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        params = self.params(request)
        sent = {"anthropic-version": self.api_version()}
        sent.update((name, value) for name, value in params.items() if name not in ("model", "messages", "system"))
        if self.prompt_cache and _marked(params):
            sent["cache_control"] = EPHEMERAL["type"]
        return params, sent

    async def _send(self, client: Any, prepared: tuple[dict[str, Any], Any]) -> tuple[Any, float]:
        started = time.perf_counter()
        message = await client.messages.create(**prepared[0])
        return message, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        content = getattr(result, "content", None)
        usage = getattr(result, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise AttemptFailure("invalid_response", "the reply is not a message (no content or usage)")
        split = _split_blocks(content)
        model = getattr(result, "model", None)
        stop = getattr(result, "stop_reason", None)
        details = getattr(usage, "output_tokens_details", None)
        thinking = getattr(details, "thinking_tokens", None)
        return ChatResponse(
            **split.fields(),
            **_anthropic_input(usage),
            completion_tokens=token_count(getattr(usage, "output_tokens", None), "usage.output_tokens"),
            reasoning_tokens=None if thinking is None else token_count(thinking, "usage.output_tokens_details"),
            latency_s=latency_s,
            model=model if isinstance(model, str) and model else self.model,
            finish_reason=stop if isinstance(stop, str) else None,
            attempts=attempts,
            refusal=(split.answer or "the model refused (stop_reason refusal)") if stop == "refusal" else None,
            sent=prepared[1],
        )

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        anthropic = self._sdk()
        if isinstance(exc, anthropic.APIStatusError):
            response = exc.response
            headers = response.headers
            return status_failure(response.status_code, response.content, retry_after_s(headers))
        if isinstance(exc, anthropic.APIResponseValidationError | json.JSONDecodeError):
            return AttemptFailure("invalid_response", one_line(f"the reply is not a message: {exc}"))
        return None


def _cached_block(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


def _mark_shared_prefix(params: dict[str, Any]) -> None:
    """Cache breakpoints on the prefix every request of a stage shares: the system prompt (the same for every case
    of a variant) and the last example turn (the same for every case with the same tags). Each marked text goes as
    one text block holding the very same string, so the model sees the same tokens; two of the API's four
    breakpoints. A prefix under the model's minimum cacheable length is simply not cached."""
    if isinstance(params.get("system"), str):
        params["system"] = _cached_block(params["system"])
    messages = params["messages"]
    if len(messages) >= 2:  # the turns before the run's own query are the examples
        shot = messages[-2]
        messages[-2] = {**shot, "content": _cached_block(shot["content"])}


def _marked(params: dict[str, Any]) -> bool:
    """Whether a cache breakpoint went out (a lone query without a system prompt has none)."""
    turns = [params.get("system"), *(message["content"] for message in params["messages"])]
    return any(isinstance(content, list) for content in turns)


def _anthropic_input(usage: Any) -> dict[str, Any]:
    """Anthropic's input as billed: `input_tokens` counts only what follows the last cache breakpoint, so the prompt
    is it plus the tokens read from the cache (`cache_read_input_tokens`) and written to it
    (`cache_creation_input_tokens`), each billed at its own rate."""
    read = getattr(usage, "cache_read_input_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    cached = None if read is None else token_count(read, "usage.cache_read_input_tokens")
    creation = None if written is None else token_count(written, "usage.cache_creation_input_tokens")
    fresh = token_count(getattr(usage, "input_tokens", None), "usage.input_tokens")
    return {
        "prompt_tokens": fresh + (cached or 0) + (creation or 0),
        "cached_tokens": cached,
        "cache_write_tokens": creation,
    }


def _split_blocks(content: list[Any]) -> Split:
    """Anthropic's content blocks: the first text block is the answer (as the reference reads it), thinking and
    redacted-thinking blocks the reasoning; other blocks are noted and left out."""
    texts = [block.text for block in content if getattr(block, "type", None) == "text"]
    split = split_think(texts[0] if texts and isinstance(texts[0], str) else "")
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "thinking":
            thinking = getattr(block, "thinking", None)
            if isinstance(thinking, str):
                split.add(thinking, "thinking_blocks")
            else:
                split.add("", "unreadable: a thinking block")
        elif kind == "redacted_thinking":
            split.add(REDACTED, "thinking_blocks")
        elif kind != "text":
            split.add("", f"unreadable: a content block of type {kind!r}")
    return split


def _split_gemini_parts(parts: list[Any]) -> Split:
    """Gemini's parts: text parts marked `thought` are the reasoning, the other text parts the answer."""
    answer = [part.text for part in parts if isinstance(getattr(part, "text", None), str) and not part.thought]
    split = split_think("".join(answer))
    for part in parts:
        if getattr(part, "thought", None) and isinstance(getattr(part, "text", None), str):
            split.add(part.text, "thought_parts")
    return split


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
        name = self.model.removeprefix("models/").lower()
        return name.startswith(THINKING_GEMINI)

    def thinking(self, request: ChatRequest) -> tuple[dict[str, Any] | None, int]:
        """The `thinking_config` to send and the room it needs on top of the answer's: a budget as asked (0: no
        thinking), else a level, else (for a thinking model) the provider's own thinking with `THINKING_ROOM`. The
        thoughts are asked for (`include_thoughts`) so that they are read as reasoning, not lost."""
        budget, level = request.thinking_budget, request.thinking_level
        if budget is None and level is None:
            return ({"include_thoughts": True}, THINKING_ROOM) if self.thinking_model() else (None, 0)
        config: dict[str, Any] = {"include_thoughts": bool(budget) or budget is None}
        if budget is not None:
            config["thinking_budget"] = budget
        if level is not None:
            config["thinking_level"] = level
        return config, THINKING_ROOM if budget is None else budget

    def chat_arguments(self, request: ChatRequest) -> tuple[dict[str, Any], str]:
        """The arguments of `chats.create` and the message then sent, as the reference builds them: the output cap
        is the answer's room (2,048 unless `--max-tokens`) plus the room thinking needs."""
        if request.reasoning_effort is not None:
            raise TransportError(
                "rejected",
                "the Gemini API has no reasoning_effort",
                attempts=0,
                fix="it takes --thinking-budget or --thinking-level: drop --reasoning-effort",
            )
        types = self._sdk().types
        system, turns = _split_system(request.messages)
        history = [
            types.Content(role="user" if message.role == "user" else "model", parts=[types.Part(text=message.content)])
            for message in turns[:-1]
        ]
        thinking, room = self.thinking(request)
        config: dict[str, Any] = {
            "system_instruction": system,
            "temperature": request.temperature,
            "max_output_tokens": (request.max_tokens or self.provider.max_tokens or 0) + room,
            "response_mime_type": "application/json" if request.json_mode else None,
            "top_p": request.top_p,
            "seed": request.seed,
        }
        try:
            generation = types.GenerateContentConfig(
                **config, thinking_config=None if thinking is None else types.ThinkingConfig(**thinking)
            )
        except ValueError as exc:  # a value the SDK's types refuse (a thinking level it does not know)
            message = one_line(f"the google-genai SDK refuses the settings: {exc}", 400)
            fix = refusal_fix(400, ServerError(str(exc)), carried(request)) or "change the generation settings"
            raise TransportError("rejected", message, attempts=0, fix=fix) from None
        arguments = {"model": self.model, "history": history, "config": generation}
        return arguments, turns[-1].content if turns else ""

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
        usage = getattr(result, "usage_metadata", None)
        answered = token_count(getattr(usage, "candidates_token_count", None), "usageMetadata.candidatesTokenCount")
        thoughts = getattr(usage, "thoughts_token_count", None)
        thought = None if thoughts is None else token_count(thoughts, "usageMetadata.thoughtsTokenCount")
        version = getattr(result, "model_version", None)
        cached = getattr(usage, "cached_content_token_count", None)
        common: dict[str, Any] = {
            "prompt_tokens": token_count(getattr(usage, "prompt_token_count", None), "usageMetadata.promptTokenCount"),
            # inside promptTokenCount, billed at the cache's rate
            "cached_tokens": None if cached is None else token_count(cached, "usageMetadata.cachedContentTokenCount"),
            "completion_tokens": answered + (thought or 0),  # thinking is billed as output
            "reasoning_tokens": thought,
            "latency_s": latency_s,
            "model": version if isinstance(version, str) and version else self.model,
            "attempts": attempts,
            "sent": prepared[1],
        }
        candidates = getattr(result, "candidates", None)
        if not candidates:
            return self._blocked(getattr(result, "prompt_feedback", None), common)
        finish = getattr(candidates[0], "finish_reason", None)
        finish_reason = getattr(finish, "value", finish) if finish is not None else None
        split = _split_gemini_parts(getattr(getattr(candidates[0], "content", None), "parts", None) or [])
        refusal = None
        if finish_reason in SAFETY_STOPS:
            detail = getattr(candidates[0], "finish_message", None) or ""
            refusal = f"stopped for {finish_reason}" + (f": {detail}" if detail else "")
        return ChatResponse(**split.fields(), finish_reason=finish_reason, refusal=refusal, **common)

    def _blocked(self, feedback: Any, common: dict[str, Any]) -> ChatResponse:
        """A reply without candidates: a prompt blocked for safety is the model's refusal; anything else is no
        response at all."""
        reason = getattr(feedback, "block_reason", None)
        if reason is None:
            detail = f" ({one_line(str(feedback))})" if feedback else ""
            raise AttemptFailure("invalid_response", f"the reply has no candidates{detail}")
        reason = str(getattr(reason, "value", reason))
        message = getattr(feedback, "block_reason_message", None) or ""
        refusal = f"prompt blocked: {reason}" + (f": {message}" if message else "")
        return ChatResponse(text="", finish_reason=reason, refusal=refusal, **common)

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            response = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            wait = retry_after_s(headers)
            if wait is None:
                wait = _retry_info_s(exc.details)
            body = json.dumps(exc.details).encode() if exc.details is not None else str(exc).encode()
            return status_failure(int(exc.code or 0), body, wait)
        if isinstance(exc, ValueError):  # a body that is not JSON, or not a response
            return AttemptFailure("invalid_response", one_line(f"the reply is not a response: {exc}"))
        return None
