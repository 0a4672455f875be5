"""The pinned reference archive, rebuilt in memory from the data directory, and a loopback HTTP server serving it.

Tests of `edsb data fetch` and of the download on first use get a real archive over real HTTP without the network;
the archive is built per test (never committed)."""

from __future__ import annotations

import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from edsb import REFERENCE_COMMIT
from edsb.data.manifest import load_manifest
from tests.support.data import DATA

TOP = f"Event-Driven-Storytelling-{REFERENCE_COMMIT}"


def build_archive(tamper: str | None = None, drop: str | None = None, runner: bytes | None = None) -> bytes:
    """A tar.gz shaped like the repository archive: one top folder, plus files the benchmark does not need."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in load_manifest():
            if name == drop:
                continue
            data = (DATA / name).read_bytes()
            if name == tamper:
                data = data.replace(b"chair", b"chaiR", 1) + b" "
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if runner is not None:
            info = tarfile.TarInfo(f"{TOP}/benchmark/runner.py")
            info.size = len(runner)
            tar.addfile(info, io.BytesIO(runner))
        extra = b"print('not benchmark data')\n"
        info = tarfile.TarInfo(f"{TOP}/main.py")
        info.size = len(extra)
        tar.addfile(info, io.BytesIO(extra))
    return buffer.getvalue()


@dataclass
class ArchiveServer:
    """What the server sends (`body`, at any path) and what it was asked for (`paths`)."""

    url: str = ""
    body: bytes = b""
    paths: list[str] = field(default_factory=list)


@contextmanager
def serve_archive(body: bytes = b"") -> Iterator[ArchiveServer]:
    """A loopback HTTP server (random port) answering every GET with `state.body` and its Content-Length."""
    state = ArchiveServer(body=body)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/archive/pinned.tar.gz"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
