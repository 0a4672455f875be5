"""What the loopback fakes of the batch APIs share: a threaded HTTP server on 127.0.0.1, started and stopped with
`with`, and a request handler that reads a body and sends JSON back."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with Content-Length, quiet; `server_owner` is the fake that serves."""

    protocol_version = "HTTP/1.1"
    server_owner: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, body: bytes, status: int = 200, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LoopbackServer:
    """A fake served by `handler_class` on a free port of 127.0.0.1, in a thread of its own."""

    handler_class: ClassVar[type[JsonHandler]]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        owner = self

        class _Handler(self.handler_class):  # type: ignore[name-defined,misc]
            server_owner = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
