"""Network conditions for tests: a port where nothing listens, a raw loopback listener for servers that misbehave
below HTTP, and a guard that blocks any connection or lookup."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest


class NetworkBlocked(OSError):
    pass


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopbackListener:
    """A listener on loopback (`host` 127.0.0.1 or ::1) that hands each accepted connection to `handle` in a thread
    of its own and counts them: the base of test servers that answer with raw bytes, faults included."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.connections = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, 0), family=family)
        self.port: int = self._listener.getsockname()[1]
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


def _is_loopback(host: Any) -> bool:
    if host in (None, "", "localhost", b"localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: resolving it would already be network traffic


def block_network(monkeypatch: pytest.MonkeyPatch, *, allow_loopback: bool) -> list[Any]:
    """From now until the test ends, socket connections and name lookups (beyond loopback, if allowed) raise
    NetworkBlocked; the returned list collects what was attempted."""
    return guard_sockets(monkeypatch.setattr, allow_loopback=allow_loopback)


def guard_sockets(patch: Callable[[Any, str, Any], None], *, allow_loopback: bool) -> list[Any]:
    """The guard of `block_network`, installed with `patch` (`monkeypatch.setattr` in a test, plain `setattr` for
    the life of a child process: see `offline_site/sitecustomize.py`)."""
    attempts: list[Any] = []
    connect = socket.socket.connect
    getaddrinfo = socket.getaddrinfo

    def allowed(host: Any) -> bool:
        return allow_loopback and _is_loopback(host)

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and not allowed(address[0]):
            attempts.append(address)
            raise NetworkBlocked(f"network access blocked in this test: {address!r}")
        connect(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not allowed(host):
            attempts.append(host)
            raise NetworkBlocked(f"name lookup blocked in this test: {host!r}")
        return getaddrinfo(host, *args, **kwargs)

    patch(socket.socket, "connect", guarded_connect)
    patch(socket, "getaddrinfo", guarded_getaddrinfo)
    return attempts
