"""End-to-end tests: the real `edsb` command line, real data, a real loopback server or the embedded model."""

from __future__ import annotations

import ipaddress
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from edsb.cli import main
from tests.support.data import DATA


def isolate_environment(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """No response cache or endpoint leaks in from the machine, and none leaks out of the test."""
    monkeypatch.setenv("EDSB_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_environment(monkeypatch, tmp_path / "cache")


def run_edsb(*args: str) -> int:
    """`edsb <args>` through the real entry point, in this process; the exit code."""
    try:
        main(list(args))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def read_results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def read_summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


class NetworkBlocked(OSError):
    pass


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

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    return attempts
