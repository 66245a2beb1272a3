"""A real HTTP server on loopback (the standard library's) that records every POST: what lake's
alert webhooks and OpenLineage's HTTP transport send. And an address nothing listens on."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Collector:
    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []  # {"path", "headers", "body"}
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                posts.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw or b"null")})
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def collecting() -> Iterator[Collector]:
    c = Collector()
    try:
        yield c
    finally:
        c.close()


def dead_url() -> str:
    """http://127.0.0.1:PORT where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
