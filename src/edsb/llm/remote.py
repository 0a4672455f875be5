"""What every remote client shares, whichever library carries its bytes: the key and the host, the proxy rule, one
session and one in-flight limit per event loop, an attempt's timeout that counts the server's time and not edsb's
own wait for its CPU (`server_timeout`), the retry loop, redaction, closing and token counts.

A provider's client (`openai_client`: aiohttp; `sdk_client`: the official SDKs over httpx2) supplies only its hooks,
as lm-evaluation-harness's `TemplateAPI` subclasses do: how a session opens and closes (`_open`, `_shut`), the request
(`_prepare`), one attempt on the wire (`_send`), the response (`_parse`) and the failures it recognises (`_failure`).
"""

from __future__ import annotations

import asyncio
import contextlib
import netrc
import os
import ssl
import urllib.request
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic_core import to_json

from edsb.llm.errors import ApiKeyError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.refusals import ServerError, Verdict, judge, refusal_fix
from edsb.llm.retry import AttemptFailure, Reach, RetryPolicy, send_with_retries
from edsb.settings.limits import RESPONSE_MB

if TYPE_CHECKING:
    from edsb.llm.providers import Provider

DEFAULT_TIMEOUT_S = 180.0
DEFAULT_MAX_IN_FLIGHT = 16
# What a server may send back (`--max-response-mb`).
DEFAULT_MAX_RESPONSE_BYTES = RESPONSE_MB << 20
# Sent to self-hosted servers (vLLM, Ollama, llama.cpp, LM Studio) when no key is configured: they ignore it.
KEYLESS_PLACEHOLDER = "no-key"
SNIPPET_CHARS = 160  # a quoted body or value in an error line
# A server's whole message in a final error: long enough for the sentence that says what to do.
MESSAGE_CHARS = 2_000
# A token count beyond any context window (and beyond what a JSON reader in a browser holds exactly).
MAX_TOKEN_COUNT = 2**53


class LoopLag:
    """How long an event loop has been kept from running on time (busy with other work, or this process waiting for
    a core): the lateness of a heartbeat it runs while any request is timed, summed."""

    TICK_S = 0.1

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.proxy(loop)  # the loop's entry in `_LAGS` must not keep it alive
        self._total = 0.0
        self._users = 0
        self._due: float | None = None  # of the next heartbeat, while one is scheduled
        self._handle: asyncio.TimerHandle | None = None

    def seconds(self) -> float:
        """The lateness so far, the heartbeat's own if it is overdue now included."""
        overdue = max(0.0, self._loop.time() - self._due) if self._due is not None else 0.0
        return self._total + overdue

    def hold(self) -> None:
        self._users += 1
        if self._handle is None:
            self._schedule()

    def release(self) -> None:
        self._users -= 1
        if not self._users and self._handle is not None:
            self._handle.cancel()
            self._handle = self._due = None

    def _schedule(self) -> None:
        self._due = self._loop.time() + self.TICK_S
        self._handle = self._loop.call_at(self._due, self._beat)

    def _beat(self) -> None:
        assert self._due is not None
        self._total += max(0.0, self._loop.time() - self._due)
        self._schedule()


_LAGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def server_timeout(seconds: float) -> AsyncIterator[None]:
    """`asyncio.timeout(seconds)` on the server's clock: the deadline moves by every moment this loop ran late, so a
    reply that sat unread while the process waited for its CPU is not the server's timeout. It moves by `seconds` at
    most, so that a server that never answers still ends the attempt, however busy the loop."""
    loop = asyncio.get_running_loop()
    lag = _LAGS.setdefault(loop, LoopLag(loop))
    started, late_before = loop.time(), lag.seconds()

    def deadline() -> float:
        return started + seconds + min(seconds, lag.seconds() - late_before)

    async with asyncio.timeout(None) as timeout:
        handle: asyncio.TimerHandle | None = None

        def check() -> None:
            nonlocal handle
            if loop.time() >= deadline():
                timeout.reschedule(loop.time())  # expires now: TimeoutError
            else:
                handle = loop.call_at(deadline(), check)

        lag.hold()
        handle = loop.call_at(deadline(), check)
        try:
            yield
        finally:
            handle.cancel()
            lag.release()


def resolve_api_key(
    base_url: str, api_key_env: str | None = None, provider: Provider | None = None, default_url: str = ""
) -> str:
    """The key from the named variable (which must then be set), else the provider's own variable.

    A provider's own host insists on a key up front; any other server (self-hosted, behind `--base-url`) gets a
    placeholder and says 401 if it wanted one. `provider`: OpenAI's when not given.
    """
    if provider is None:
        from edsb.llm.providers import PROVIDERS

        provider = PROVIDERS["openai"]
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ApiKeyError(f"environment variable {api_key_env} (named by --api-key-env) is not set or empty")
        return value
    value = os.environ.get(provider.key_env)
    if value:
        return value
    if base_url == default_url and not provider.keyless:
        raise ApiKeyError(f"{provider.key_env} is not set: export it, or name the key variable with --api-key-env")
    return KEYLESS_PLACEHOLDER


def flat(text: str) -> str:
    return " ".join(text.split())


def one_line(text: str, limit: int = SNIPPET_CHARS) -> str:
    """Flattened and shortened for an error line. Shorten only after redacting secrets: a cut through a key
    would leave part of it unrecognisable to the redaction."""
    text = flat(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def whole_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A server's message flattened, whole when it fits; else cut at the end of its last sentence that does, so the
    sentence that says what to do is never cut in the middle."""
    text = flat(text)
    if len(text) <= limit:
        return text
    end = max(text.rfind(". ", 0, limit), text.rfind("; ", 0, limit))
    return (text[: end + 1] if end > 0 else text[: limit - 3]) + " ..."


def token_count(value: Any, name: str) -> int:
    """A usage field as a count: absent or null is 0; anything but a whole non-negative number is no completion."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        try:
            shown = to_json(value).decode("utf-8", "replace")
        except ValueError:  # not JSON-like (an SDK object)
            shown = repr(value)
        raise AttemptFailure("invalid_response", f"{name} is not a token count: {one_line(shown, 40)}")
    return value


@dataclass(frozen=True)
class ProxyRoute:
    """The proxy a request goes through: its URL without credentials, and the credentials apart."""

    url: str
    auth: tuple[str, str] | None = None


def env_proxy(url: str) -> ProxyRoute | None:
    """The one proxy rule of every remote client, as curl and aiohttp's `trust_env` have it: `HTTP_PROXY` /
    `HTTPS_PROXY` for the endpoint's scheme unless `NO_PROXY` exempts its host; the proxy's credentials from its URL,
    else from `~/.netrc` (or the file `NETRC` names). Read once per model: the environment does not change under a
    run."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    named = urllib.request.getproxies().get(parts.scheme)
    if not named:
        return None
    proxy = urlsplit(named if "://" in named else f"http://{named}")
    host = proxy.hostname or ""
    netloc = host if proxy.port is None else f"{host}:{proxy.port}"
    bare = urlunsplit((proxy.scheme, netloc, proxy.path, "", ""))
    if proxy.username is not None:
        return ProxyRoute(bare, (unquote(proxy.username), unquote(proxy.password or "")))
    return ProxyRoute(bare, _netrc_auth(host))


def _netrc_auth(host: str) -> tuple[str, str] | None:
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None
    if entry is None:
        return None
    login, _, password = entry
    return login or "", password or ""


def tls_context() -> ssl.SSLContext:
    """The system's trust store as OpenSSL finds it now (so `SSL_CERT_FILE` / `SSL_CERT_DIR` apply), HTTP/1.1 by
    ALPN: built per model, so a variable set after an HTTP library's import still counts."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


def carried(request: ChatRequest) -> frozenset[str]:
    """The run's settings a request carries, by `ChatRequest` field name (`json_mode` when JSON mode is asked): a
    refusal's fix names the option among them."""
    names = {name for name in _SETTINGS if getattr(request, name) is not None}
    return frozenset(names | ({"json_mode"} if request.json_mode else set()))


_SETTINGS = ("temperature", "top_p", "max_tokens", "reasoning_effort", "thinking_budget", "thinking_level", "seed")


class RemoteChatModel:
    """A model behind a provider's API.

    At most `max_in_flight` requests are on the wire at once (waits between retries do not count). The session and
    the limit belong to one event loop; they are rebuilt when the model is used from another one.
    """

    not_found_hint = ""  # added to a 404's message: where the address or the model name may be wrong

    def __init__(
        self,
        model: str,
        provider: Provider,
        base_url: str,
        *,
        api_key_env: str | None = None,
        default_url: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if max_response_bytes < 1:
            raise ValueError("max_response_bytes must be at least 1")
        self.model = model
        self.provider = provider
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_in_flight = max_in_flight
        self.max_response_bytes = max_response_bytes
        self._api_key = resolve_api_key(base_url, api_key_env, provider, default_url)
        self._proxy: ProxyRoute | None = None  # looked up with the first session
        self._proxy_read = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._gate: asyncio.Semaphore | None = None
        self._reach = Reach()  # has any request reached the server (any HTTP response)?

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def identity(self) -> str:
        return f"{self.provider.name}:{self.model}@{self.base_url}"

    # The provider's hooks.
    def _open(self) -> Any:
        """A new session for the running loop."""
        raise NotImplementedError

    async def _shut(self, session: Any) -> None:
        raise NotImplementedError

    def _prepare(self, request: ChatRequest) -> Any:
        """The request as the provider takes it, built once for all its attempts; a `TransportError` with a `fix`
        (nothing sent) for a setting this API does not have."""
        raise NotImplementedError

    async def _send(self, session: Any, prepared: Any) -> tuple[Any, float]:
        """One attempt: what came back and the seconds it took; `AttemptFailure` for a failure it sorts itself."""
        raise NotImplementedError

    def _parse(self, payload: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        """The response from what came back; `prepared` says what was sent (recorded as `ChatResponse.sent`)."""
        raise NotImplementedError

    def _failure(self, exc: Exception) -> AttemptFailure | None:
        """An exception of the library as a transport kind; None for a fault of edsb's own (raised as it is)."""
        raise NotImplementedError

    # What they share.
    def proxy(self) -> ProxyRoute | None:
        """The proxy for this endpoint (`env_proxy`), looked up once."""
        if not self._proxy_read:
            self._proxy = env_proxy(self.base_url)
            self._proxy_read = True
        return self._proxy

    def _session_and_gate(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._session is None or self._gate is None or self._loop is not loop:
            self._session = self._open()
            self._gate = asyncio.Semaphore(self.max_in_flight)
            self._loop = loop
        return self._session, self._gate

    async def complete(self, request: ChatRequest) -> ChatResponse:
        session, gate = self._session_and_gate()
        prepared = self._prepare(request)

        async def attempt(number: int) -> ChatResponse:
            async with gate:
                try:
                    async with server_timeout(self.timeout_s):
                        payload, latency_s = await self._send(session, prepared)
                except TimeoutError:
                    raise AttemptFailure("timeout", f"no complete response within {self.timeout_s:g} s") from None
                except AttemptFailure:
                    raise
                except Exception as exc:
                    failure = self._failure(exc)
                    if failure is None:
                        raise  # not the endpoint's failure: a fault of edsb's own
                    raise failure from exc
            self._reach.answered = True
            return self._parse(payload, latency_s, number, prepared)

        def judged(failure: AttemptFailure) -> Verdict:
            error = failure.error or ServerError(failure.message)
            return judge(failure.status if failure.kind == "http" else None, error, carried(request))

        return await send_with_retries(attempt, self.retry, self._reach, self._describe, judged)

    def _describe(self, failure: AttemptFailure) -> str:
        """The failure's message, redacted; a 404 gets the hint of where the address may be wrong, unless the
        server's own words say what is (`only supported in v1/responses`: the address reached the API)."""
        message = whole_message(self._redact(failure.message))
        if failure.status == 404 and self.not_found_hint and refusal_fix(404, ServerError(message)) is None:
            message += f" ({self.not_found_hint})"
        return message

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key in error bodies; errors end up in transcripts and on screen."""
        return text.replace(self._api_key, "***") if self._api_key != KEYLESS_PLACEHOLDER else text

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._shut(self._session)
        self._session = None
        self._gate = self._loop = None
