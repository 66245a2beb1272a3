"""The HTTP server of `lake docs serve`: the docs site and the run report, nothing else.

`out/` also holds what must not leave the machine (the demo's project with its lake.yaml, logs),
so the server answers only under the folders it is given (`/docs/`, `/report/`), never lists a
directory (a folder's `index.html` or 404), never follows a symbolic link or serves a dot-file,
and answers only requests whose `Host` header names this machine: a page on another site that
points a name of its own at 127.0.0.1 (DNS rebinding) gets 403, not the warehouse's docs.
"""

from __future__ import annotations

import http.server
import io
import ipaddress
import socket
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit


def host_names(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Names a `Host` header may carry (besides any IP address): loopback names, this machine's
    names, the address the server is bound to, and `extra` (`--allow-host`)."""
    names = {"localhost", bound, socket.gethostname(), socket.getfqdn(), *extra}
    return frozenset(n.lower().rstrip(".") for n in names if n)


def _host_of(header: str) -> str:
    """The name in a Host header, without the port ("[::1]:8080" -> "::1")."""
    h = header.strip()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files under `roots` (URL folder -> directory); see the module docstring."""

    roots: dict[str, Path] = {}
    hosts: frozenset[str] = frozenset()
    home = "/docs/index.html"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        return

    def list_directory(self, path: str | Path) -> None:  # type: ignore[override]
        self.send_error(HTTPStatus.NOT_FOUND, "directory listings are off")
        return None

    def translate_path(self, path: str) -> str:
        return str(self._file) if self._file is not None else ""

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        self._file: Path | None = None
        host = self.headers.get("Host")
        if host is not None:
            name = _host_of(host).lower().rstrip(".")
            if not (_is_ip(name) or name in self.hosts):
                self.send_error(HTTPStatus.FORBIDDEN, f"this server does not answer to the host {name!r} "
                                "(DNS rebinding protection); open it by IP address or localhost, or start it with --allow-host")
                return None
        url = urlsplit(self.path).path
        if url in ("", "/"):
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", self.home)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        target = self._target(url)
        if target is not None and target.is_dir():
            if not url.endswith("/"):
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", url + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            target = target / "index.html"
        if target is None or target.is_symlink() or not target.is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return None
        self._file = target
        return super().send_head()

    def _target(self, url: str) -> Path | None:
        """The file or folder `url` names under a root, None when it names none or goes through a
        symbolic link, a dot-file or `..`."""
        parts = [unquote(p) for p in url.split("/") if p]
        if not parts or parts[0] not in self.roots:
            return None
        here = self.roots[parts[0]]
        if here.is_symlink():
            return None
        for p in parts[1:]:
            if p.startswith(".") or "/" in p or "\\" in p or "\0" in p:
                return None
            here = here / p
            if here.is_symlink():
                return None
        return here


def site_server(roots: dict[str, Path], host: str, port: int, allow_hosts: Iterable[str] = ()) -> http.server.ThreadingHTTPServer:
    """A server (not yet serving) of `roots` on `host:port`; `serve_forever()` runs it."""
    handler = type("Handler", (SiteHandler,), {"roots": dict(roots), "hosts": host_names(host, allow_hosts)})
    return http.server.ThreadingHTTPServer((host, port), handler)
