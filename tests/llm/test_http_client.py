"""edsb's HTTP/1.1 client (`edsb.llm.http`) under `openai:<model>`, against real sockets on loopback: TLS verified
against a certificate made for the test, a CONNECT tunnel through a proxy, every body framing a server may choose,
and connections the server closes."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from edsb.llm import ChatRequest, OpenAIChatModel, RetryPolicy, TransportError
from edsb.llm.errors import ModelSpecError

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


class _Listener:
    """A loopback listener that hands each accepted connection to `handle` in a thread of its own."""

    def __init__(self) -> None:
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.handle, args=(connection,), daemon=True).start()

    def handle(self, connection: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._listener.close()


class RawServer(_Listener):
    """A loopback server whose `answer(index)` gives the raw bytes of the index-th reply (across connections) and
    whether to close the connection after it; it counts the connections it accepted."""

    def __init__(self, answer: Callable[[int], tuple[bytes, bool]], tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.heads: list[bytes] = []
        super().__init__()

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


class ConnectProxy(_Listener):
    """An HTTP proxy that only tunnels (CONNECT), recording each tunnel's target."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        super().__init__()

    def handle(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                head += client.recv(4096)
            target = head.split(b" ")[1].decode()
            self.tunnels.append(target)
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
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        model = OpenAIChatModel("m", base_url=f"https://localhost:{tls_server.port}/v1", retry=NO_RETRIES)
        assert _ask(model, times=2) == ["over TLS", "over TLS"]
    finally:
        proxy.close()
    assert proxy.tunnels == [f"localhost:{tls_server.port}"]  # one tunnel, kept alive; TLS inside it
    assert tls_server.heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1")


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
    ],
    ids=["content-length", "chunked", "connection-close", "read-to-close"],
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
    assert caught.value.kind == "connection" and "HttpParserError" in str(caught.value)


@pytest.mark.parametrize(
    ("base_url", "environment", "message"),
    [
        ("ftp://models.example/v1", {}, r"not an http\(s\) URL"),
        ("https://models.example/v1", {"HTTPS_PROXY": "https://proxy.example:3128"}, "only http:// proxies"),
        ("http://127.0.0.1:9/v1", {"OPENAI_API_KEY": "sk-line\r\nX-Injected: 1"}, "character HTTP does not allow"),
    ],
    ids=["not-http", "https-proxy", "key-with-a-line-break"],
)
def test_an_address_a_proxy_or_a_key_that_cannot_work_is_a_usage_error(
    base_url: str, environment: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ModelSpecError, match=message) as caught:
        OpenAIChatModel("m", base_url=base_url)
    assert "sk-line" not in str(caught.value)  # the key is never shown
