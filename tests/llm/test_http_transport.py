"""`openai:<model>` over aiohttp against real sockets on loopback: TLS verified against a certificate made for the
test, a CONNECT tunnel through a proxy, every body framing a server may choose, connections the server closes; each
way a server can fail mapped onto its transport kind; and the limits on what a server may send back."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import select
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from edsb.llm import ChatRequest, OpenAIChatModel, RetryPolicy, TransportError
from edsb.llm.errors import ModelSpecError
from tests.support.network import LoopbackListener, closed_port

COMPLETION = json.dumps(
    {"choices": [{"message": {"content": "over TLS"}, "finish_reason": "stop"}], "model": "m", "usage": {}}
).encode()
NO_RETRIES = RetryPolicy(max_retries=0)


def _request(index: int = 0) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.0, sample_index=index)  # type: ignore[list-item]


def _ask(model: OpenAIChatModel, times: int = 1, pause_s: float = 0.0) -> list[str]:
    async def run() -> list[str]:
        texts = []
        try:
            for index in range(times):
                texts.append((await model.complete(_request(index))).text)
                await asyncio.sleep(pause_s)
        finally:
            await model.aclose()
        return texts

    return asyncio.run(run())


def _read_request(connection: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes] | None:
    """(head, rest) of one request with a Content-Length body; None when the peer closed first."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    while len(rest) < length:
        rest += connection.recv(65536)
    return head, rest[length:]


class RawServer(LoopbackListener):
    """A loopback server whose `answer(index)` gives the raw bytes of the index-th reply (across connections) and
    whether to close the connection after it; it counts the connections it accepted."""

    def __init__(
        self, answer: Callable[[int], tuple[bytes, bool]], tls: ssl.SSLContext | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.answer = answer
        self.tls = tls
        self.heads: list[bytes] = []
        super().__init__(host)

    def handle(self, connection: socket.socket) -> None:
        try:
            if self.tls is not None:
                connection = self.tls.wrap_socket(connection, server_side=True)
            rest = b""
            while (got := _read_request(connection, rest)) is not None:
                head, rest = got
                self.heads.append(head)
                reply, close = self.answer(len(self.heads) - 1)
                connection.sendall(reply)
                if close:
                    break
        except (OSError, ssl.SSLError):
            pass
        finally:
            connection.close()


def _with_length(body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, made by the openssl command for this test."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[RawServer]:
    key, cert = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = RawServer(lambda index: (_with_length(COMPLETION), False), tls=context)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _no_proxy_or_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_https_is_verified_against_the_trust_store(
    tls_server: RawServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"https://localhost:{tls_server.port}/v1"
    with pytest.raises(TransportError) as untrusted:  # the test's certificate is in no trust store yet
        _ask(OpenAIChatModel("m", base_url=url, retry=NO_RETRIES))
    assert untrusted.value.kind == "unreachable" and "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[1]))  # OpenSSL's default trust store is now this file
    refused = tls_server.connections
    assert _ask(OpenAIChatModel("m", base_url=url, retry=NO_RETRIES), times=2) == ["over TLS", "over TLS"]
    assert tls_server.connections - refused == 1  # kept alive across both requests
    assert tls_server.heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1")


class ConnectProxy(LoopbackListener):
    """An HTTP proxy that only tunnels (CONNECT), recording each tunnel's target."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self.heads: list[bytes] = []
        super().__init__()

    def handle(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                head += client.recv(4096)
            target = head.split(b" ")[1].decode()
            self.tunnels.append(target)
            self.heads.append(head)
            host, _, port = target.rpartition(":")
            with socket.create_connection((host, int(port))) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                while True:
                    readable, _, _ = select.select([client, upstream], [], [], 5)
                    if not readable:
                        return
                    for source in readable:
                        data = source.recv(65536)
                        if not data:
                            return
                        (upstream if source is client else client).sendall(data)


def test_https_goes_through_a_connect_tunnel(
    tls_server: RawServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[1]))
        monkeypatch.setenv("HTTPS_PROXY", f"http://edsb:tunnel%20pw@127.0.0.1:{proxy.port}")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-for-the-server-only")
        model = OpenAIChatModel("m", base_url=f"https://localhost:{tls_server.port}/v1", retry=NO_RETRIES)
        assert _ask(model, times=2) == ["over TLS", "over TLS"]
    finally:
        proxy.close()
    assert proxy.tunnels == [f"localhost:{tls_server.port}"]  # one tunnel, kept alive; TLS inside it
    assert tls_server.heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1")
    assert b"Authorization: Bearer sk-for-the-server-only" in tls_server.heads[0]
    # The key goes inside the tunnel only (aiohttp sends a session's default headers to the proxy as well).
    assert b"sk-for-the-server-only" not in b"".join(proxy.heads)
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"edsb:tunnel pw") in proxy.heads[0]
    assert b"Proxy-Authorization" not in tls_server.heads[0]


def _chunked(body: bytes) -> bytes:
    middle = len(body) // 2
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:middle], body[middle:]))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + chunks + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("reply", "close", "connections"),
    [
        (_with_length(COMPLETION), False, 1),  # kept alive: one connection for three requests
        (_chunked(COMPLETION), False, 1),
        (_with_length(COMPLETION, "Connection: close\r\n"), True, 3),  # the server asked to close: a new one each time
        (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + COMPLETION, True, 3),  # body ends at close
        (b"HTTP/1.1 100 Continue\r\n\r\n" + _with_length(COMPLETION), False, 1),  # an interim reply first
    ],
    ids=["content-length", "chunked", "connection-close", "read-to-close", "100-continue"],
)
def test_every_body_framing_is_read(reply: bytes, close: bool, connections: int) -> None:
    server = RawServer(lambda index: (reply, close))
    try:
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", retry=NO_RETRIES)
        assert _ask(model, times=3) == ["over TLS"] * 3
    finally:
        server.close()
    assert server.connections == connections


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    """The server drops each connection after its reply without saying so: the client notices while the connection
    is idle and opens another, with no failed attempt."""
    server = RawServer(lambda index: (_with_length(COMPLETION), True))
    try:
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", retry=NO_RETRIES)
        assert _ask(model, times=3, pause_s=0.05) == ["over TLS"] * 3
    finally:
        server.close()
    assert server.connections == 3


def test_a_reply_that_is_not_http_is_a_broken_connection() -> None:
    server = RawServer(lambda index: (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", True))
    try:
        with pytest.raises(TransportError) as caught:
            _ask(OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", retry=NO_RETRIES))
    finally:
        server.close()
    assert caught.value.kind == "connection" and "not valid HTTP: Bad status line" in str(caught.value)


@pytest.mark.parametrize(
    ("base_url", "environment", "message"),
    [
        ("ftp://models.example/v1", {}, r"not an http\(s\) URL"),
        ("http://models.example:99999/v1", {}, "out of range"),
        ("https://models.example/v1", {"HTTPS_PROXY": "https://proxy.example:3128"}, "only http:// proxies"),
        ("http://models.example/v1", {"HTTP_PROXY": "https://user:secret@proxy.example:3128"}, "only http:// proxies"),
        ("http://127.0.0.1:9/v1", {"OPENAI_API_KEY": "sk-line\r\nX-Injected: 1"}, "character HTTP does not allow"),
    ],
    ids=["not-http", "port-out-of-range", "https-proxy", "https-proxy-for-http", "key-with-a-line-break"],
)
def test_an_address_a_proxy_or_a_key_that_cannot_work_is_a_usage_error(
    base_url: str, environment: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ModelSpecError, match=message) as caught:
        OpenAIChatModel("m", base_url=base_url)
    assert "sk-line" not in str(caught.value) and "secret" not in str(caught.value)  # secrets are never shown


# --- every way a server can fail, as the transport kind it is recorded with --------------------------------------


class Scripted(LoopbackListener):
    """A loopback server that does `serve(connection)` with every connection it accepts (`released` frees the ones
    that wait forever, so the test ends at once)."""

    def __init__(self, serve: Callable[[socket.socket, threading.Event], None]) -> None:
        self.serve = serve
        self.released = threading.Event()
        super().__init__()

    def handle(self, connection: socket.socket) -> None:
        try:
            self.serve(connection, self.released)
        except OSError:
            pass
        finally:
            connection.close()

    def close(self) -> None:
        self.released.set()
        super().close()


def _reset(connection: socket.socket) -> None:
    """Close with a TCP reset (RST) instead of an orderly close."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _reset_mid_body(connection: socket.socket, released: threading.Event) -> None:
    _read_request(connection)
    connection.sendall(_with_length(COMPLETION)[: -len(COMPLETION) // 2])
    released.wait(0.05)  # the head and half the body are on their way; then the reset
    _reset(connection)


def _truncated_chunked(connection: socket.socket, released: threading.Event) -> None:
    _read_request(connection)
    whole = _chunked(COMPLETION)
    connection.sendall(whole[: len(whole) - 20])  # the last chunk cut short, no terminating chunk
    connection.shutdown(socket.SHUT_RDWR)


def _closed_without_reply(connection: socket.socket, released: threading.Event) -> None:
    _read_request(connection)


def _never_answers(connection: socket.socket, released: threading.Event) -> None:
    _read_request(connection)
    released.wait()


def _head(lines: bytes) -> Callable[[socket.socket, threading.Event], None]:
    def serve(connection: socket.socket, released: threading.Event) -> None:
        _read_request(connection)
        connection.sendall(b"HTTP/1.1 200 OK\r\n" + lines + f"Content-Length: {len(COMPLETION)}\r\n\r\n".encode())
        connection.sendall(COMPLETION)

    return serve


def _refusing_proxy(connection: socket.socket, released: threading.Event) -> None:
    head = b""
    while b"\r\n\r\n" not in head:
        head += connection.recv(4096)
    assert head.startswith(b"CONNECT ")
    connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")


FAILURES: dict[str, tuple[Callable[[socket.socket, threading.Event], None] | None, str, str]] = {
    # name: (server, kind, words of the message)
    "refused-port": (None, "unreachable", "Connect call failed"),
    "reset-mid-body": (_reset_mid_body, "connection", "ClientPayloadError"),
    "truncated-chunked-body": (_truncated_chunked, "connection", "TransferEncodingError"),
    "closed-without-a-reply": (_closed_without_reply, "connection", "ServerDisconnectedError"),
    "never-answers": (_never_answers, "timeout", "no complete response within 0.3 s"),
    "200000-headers": (_head(b"X-Filler: a\r\n" * 200_000), "oversized", "Too many headers"),
    "a-header-line-too-long": (_head(b"X-Filler: " + b"a" * 9000 + b"\r\n"), "oversized", "8190 bytes"),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_each_way_a_server_fails_is_its_own_kind(name: str) -> None:
    serve, kind, words = FAILURES[name]
    server = Scripted(serve) if serve is not None else None
    port = server.port if server is not None else closed_port()
    try:
        with pytest.raises(TransportError) as caught:
            _ask(OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", retry=NO_RETRIES, timeout_s=0.3))
    finally:
        if server is not None:
            server.close()
    assert caught.value.kind == kind, str(caught.value)
    assert words in str(caught.value)


def test_a_proxy_that_refuses_the_tunnel_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = Scripted(_refusing_proxy)
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(TransportError) as caught:
            _ask(OpenAIChatModel("m", base_url="https://models.invalid/v1", retry=NO_RETRIES))
    finally:
        proxy.close()
    assert caught.value.kind == "unreachable"
    assert "the proxy refused the tunnel (HTTP 403" in str(caught.value)
    assert proxy.connections == 1


def test_the_proxy_and_its_netrc_credentials_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As aiohttp's `trust_env` finds them (credentials for the proxy from `~/.netrc`), but once per model: a
    `.netrc` that changes after the first request is never read again."""
    proxy = RawServer(lambda index: (_with_length(COMPLETION), False))
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login edsb password from-netrc\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    try:
        model = OpenAIChatModel("m", base_url="http://models.invalid/v1", retry=NO_RETRIES)

        async def twice() -> list[str]:
            first = await model.complete(_request(0))
            netrc.write_text("machine 127.0.0.1 login edsb password changed\n")
            second = await model.complete(_request(1))
            await model.aclose()
            return [first.text, second.text]

        assert asyncio.run(twice()) == ["over TLS", "over TLS"]
    finally:
        proxy.close()
    assert all(head.startswith(b"POST http://models.invalid/v1/chat/completions HTTP/1.1") for head in proxy.heads)
    expected = b"Proxy-Authorization: Basic " + base64.b64encode(b"edsb:from-netrc")
    assert len(proxy.heads) == 2 and all(expected in head for head in proxy.heads), proxy.heads


# --- the limits on what a server may send back -------------------------------------------------------------------


def _endless(framing: str, total: int = 1 << 30) -> Callable[[socket.socket, threading.Event], None]:
    """A reply whose body runs to `total` bytes (1 GiB) in 1 MiB pieces, sent only as fast as it is read:
    announced by Content-Length, chunked, or ending where the connection does."""
    piece = b"x" * (1 << 20)

    def serve(connection: socket.socket, released: threading.Event) -> None:
        _read_request(connection)
        if framing == "content-length":
            connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
        elif framing == "chunked":
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        else:
            connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
        for _ in range(total // len(piece)):
            if released.is_set():
                return
            if framing == "chunked":
                connection.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            else:
                connection.sendall(piece)

    return serve


@pytest.mark.parametrize("framing", ["content-length", "chunked", "read-to-close"])
def test_a_body_over_the_limit_is_oversized_and_not_asked_for_again(framing: str) -> None:
    server = Scripted(_endless(framing))
    try:
        model = OpenAIChatModel(
            "m", base_url=f"http://127.0.0.1:{server.port}/v1", retry=RetryPolicy(max_retries=3, initial_delay_s=0)
        )
        with pytest.raises(TransportError) as caught:
            _ask(model)
    finally:
        server.close()
    assert (caught.value.kind, caught.value.attempts) == ("oversized", 1)
    assert f"limit of {16 << 20:,}" in str(caught.value)
    assert server.connections == 1


def test_the_body_limit_is_an_option_and_the_connection_is_not_reused_after_it() -> None:
    """A completion of 2 KiB against a 1 KiB limit, then the same server with the limit raised: the first
    model's connection was dropped mid-body (its rest would have been read as the next reply)."""
    padded = json.dumps(
        {"choices": [{"message": {"content": "x" * 2048}, "finish_reason": "stop"}], "model": "m", "usage": {}}
    ).encode()
    server = RawServer(lambda index: (_chunked(padded), False))
    try:
        small = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", max_response_bytes=1024)
        with pytest.raises(TransportError) as caught:
            _ask(small)
        assert caught.value.kind == "oversized"
        large = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", max_response_bytes=4096)
        assert _ask(large, times=2) == ["x" * 2048] * 2
    finally:
        server.close()
    assert server.connections == 2


def test_a_compressed_body_counts_as_decompressed() -> None:
    """A gzip'd body of 17 KB that inflates to 17 MiB is over the limit; one that inflates to a completion is read."""
    bomb = gzip.compress(b"{" + b" " * (17 << 20) + b"}")
    small = gzip.compress(COMPLETION)
    replies = [_with_length(body, "Content-Encoding: gzip\r\n") for body in (bomb, small)]
    server = RawServer(lambda index: (replies[min(index, 1)], False))
    try:
        with pytest.raises(TransportError) as caught:
            _ask(OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1", retry=NO_RETRIES))
        assert _ask(OpenAIChatModel("m", base_url=f"http://127.0.0.1:{server.port}/v1")) == ["over TLS"]
    finally:
        server.close()
    assert len(bomb) < 100_000 and caught.value.kind == "oversized"
    assert b"accept-encoding: gzip" in server.heads[0].lower()


def test_an_ipv6_literal_endpoint_is_asked() -> None:
    server = RawServer(lambda index: (_with_length(COMPLETION), False), host="::1")
    try:
        assert _ask(OpenAIChatModel("m", base_url=f"http://[::1]:{server.port}/v1"), times=2) == ["over TLS"] * 2
    finally:
        server.close()
    assert server.heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1")
    assert f"Host: [::1]:{server.port}".encode() in server.heads[0]
