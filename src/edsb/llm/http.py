"""The HTTP/1.1 client under `openai:<model>`: keep-alive connections on asyncio, replies parsed by httptools.

edsb sends one kind of request (a POST with a JSON body) at high concurrency, so the client's own CPU per request is
a large part of the harness's: measured side by side in a Table 1 sweep, this client in place of aiohttp's general-
purpose request path (cookies, redirects, tracing, multidict headers) cut the harness's main-process CPU by a
quarter, about 0.35 ms per request; with h11's pure-Python framing in place of httptools, two thirds of that gain
went back. Requests are written whole (their headers are fixed per client and checked once); replies are parsed by
httptools (the llhttp parser uvicorn uses), which frames Content-Length and chunked bodies and says whether the
connection stays open; a body with neither ends where the connection does. What edsb needs beyond the bytes is here:
a connection per request in flight, kept alive and reused; TLS with the system's trust store; `HTTP_PROXY` /
`HTTPS_PROXY` (absolute-form requests through the proxy for `http://`, a CONNECT tunnel for `https://`); and two
kinds of failure, `ConnectFailed` when no connection could be opened (a wrong address, a server that is down) and
`ConnectionBroken` when one broke or the reply was not HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import httptools


class ConnectFailed(Exception):
    """No connection could be opened: name resolution, refusal, a TLS handshake, a proxy that refused the tunnel."""


class ConnectionBroken(Exception):
    """A connection broke after opening: reset, closed before a whole reply, or a reply that is not HTTP."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> _Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls(parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the one request/reply exchange on it at a time; replies are parsed by
    httptools (llhttp), which frames Content-Length and chunked bodies and says whether the connection stays open."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._waiter: asyncio.Future[Response] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._head_only = False
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._headers_done = False
        self._keep_alive = False

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._parser is None or self._waiter is None or self._waiter.done():
            self.close()  # a server talking out of turn: nothing it says on this connection can be trusted
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # a tunnel's head (CONNECT): already answered in `on_headers_complete`
            pass
        except httptools.HttpParserError as exc:
            self._fail(ConnectionBroken(f"{type(exc).__name__}: {exc}"))

    def eof_received(self) -> bool:
        # A body without Content-Length or chunked framing ends where the connection does (RFC 9112, 6.3).
        if self._headers_done and "content-length" not in self._headers and "transfer-encoding" not in self._headers:
            self._complete()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        detail = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection before a whole reply"
        self._fail(ConnectionBroken(detail))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self._status = self._parser.get_status_code()
        self._headers_done = True
        if self._head_only:
            self._complete()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if 100 <= self._status < 200:  # an interim reply (100 Continue): the real one follows
            self._headers, self._body, self._headers_done = {}, [], False
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._complete()

    def _complete(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(Response(self._status, self._headers, b"".join(self._body)))

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    async def exchange(self, request: bytes, *, head_only: bool = False) -> Response:
        """Send a whole request and wait for its whole reply (only the head for CONNECT, whose body is the tunnel)."""
        assert self.transport is not None
        if self.closed:
            raise ConnectionBroken("the connection was closed")
        self._parser = httptools.HttpResponseParser(self)
        self._head_only, self._status, self._headers, self._body = head_only, 0, {}, []
        self._headers_done = self._keep_alive = False
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def reusable(self) -> bool:
        """After a whole exchange: may carry the next one (the server did not ask to close)."""
        return self._keep_alive and not self.closed

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HttpClient:
    """POSTs to one origin over kept-alive connections, directly or through `proxy` (an `http://` proxy URL).

    Belongs to the event loop it is first used on. Callers bound the requests in flight; every request has a
    connection of its own, taken from the idle ones or newly opened.
    """

    def __init__(self, origin: str, headers: dict[str, str], proxy: str | None = None) -> None:
        """ValueError for an origin or proxy this client cannot use (not http(s), a header HTTP does not allow)."""
        self.target = _Endpoint.of(origin)
        self.proxy = _Endpoint.of(proxy) if proxy else None
        if self.proxy is not None and self.proxy.scheme != "http":
            raise ValueError(f"proxy {proxy!r}: only http:// proxies are supported (TLS to the target goes inside)")
        proxy_headers = {}
        if proxy and (credentials := _proxy_credentials(proxy)):
            proxy_headers["Proxy-Authorization"] = f"Basic {credentials}"
        self._proxy_headers = _header_lines(proxy_headers)
        self._headers = _header_lines({"Host": self.target.authority, **headers})
        if self.proxy is not None and self.target.scheme == "http":  # absolute form, as a proxy expects
            self._prefix = f"http://{self.target.authority}"
            self._headers += self._proxy_headers
        else:
            self._prefix = ""
        self._idle: list[_Connection] = []
        self._tls: ssl.SSLContext | None = None

    async def post(self, path: str, body: bytes) -> Response:
        """The reply to `POST path`; ConnectFailed or ConnectionBroken when there is none. A cancelled request
        (a timeout) closes its connection, whose reply would otherwise arrive on the next request."""
        if any(character in path for character in "\r\n "):
            raise ValueError(f"not a request path: {path!r}")
        head = f"POST {self._prefix}{path} HTTP/1.1\r\n{self._headers}Content-Length: {len(body)}\r\n\r\n"
        connection = await self._connection()
        try:
            response = await connection.exchange(head.encode("latin-1") + body)
        except BaseException:
            connection.close()
            raise
        if connection.reusable():
            self._idle.append(connection)
        else:
            connection.close()
        return response

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return await self._open()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        first_hop = self.proxy or self.target
        direct_tls = self.proxy is None and self.target.scheme == "https"
        try:
            _, connection = await loop.create_connection(
                _Connection,
                first_hop.host,
                first_hop.port,
                ssl=self._tls_context() if direct_tls else None,
                server_hostname=self.target.host if direct_tls else None,
            )
        except OSError as exc:  # refused, unreachable, name resolution (gaierror), TLS (SSLError)
            raise ConnectFailed(f"{type(exc).__name__}: cannot connect to {first_hop.authority}: {exc}") from None
        if self.proxy is not None and self.target.scheme == "https":
            connection = await self._tunnel(connection)
        return connection

    async def _tunnel(self, connection: _Connection) -> _Connection:
        """CONNECT through the proxy, then TLS to the target inside the tunnel."""
        host = f"[{self.target.host}]" if ":" in self.target.host else self.target.host
        authority = f"{host}:{self.target.port}"
        request = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{self._proxy_headers}\r\n"
        try:
            reply = await connection.exchange(request.encode("latin-1"), head_only=True)
        except ConnectionBroken as exc:
            connection.close()
            raise ConnectFailed(f"the proxy closed the tunnel request: {exc}") from None
        if not 200 <= reply.status < 300:
            connection.close()
            raise ConnectFailed(f"the proxy refused a tunnel to {authority} (HTTP {reply.status})")
        assert connection.transport is not None
        tunnelled = _Connection()
        try:
            transport = await asyncio.get_running_loop().start_tls(
                connection.transport, tunnelled, self._tls_context(), server_hostname=self.target.host
            )
        except OSError as exc:
            connection.close()
            raise ConnectFailed(f"{type(exc).__name__}: TLS to {authority} through the proxy failed: {exc}") from None
        assert transport is not None
        tunnelled.connection_made(transport)
        return tunnelled

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:  # loading the trust store costs tens of milliseconds: only for https
            self._tls = ssl.create_default_context()
        return self._tls


def _header_lines(headers: dict[str, str]) -> str:
    """`Name: value` lines, checked once: a value from the environment (a key) must not smuggle in a header."""
    lines = []
    for name, value in headers.items():
        allowed = name.isascii() and ":" not in name and not any(c in name + value for c in "\r\n\0")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            allowed = False
        if not allowed:
            raise ValueError(f"header {name!r} has a character HTTP does not allow")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines)


def _proxy_credentials(proxy: str) -> str | None:
    parts = urlsplit(proxy)
    if parts.username is None:
        return None
    user_password = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return base64.b64encode(user_password.encode()).decode("ascii")
