"""A loopback TCP proxy in front of a real HTTP server (the S3 server of tests/s3_fixture.py) that
injects network faults into chosen requests, so a client's retry and error handling meet real
sockets, not a mocked SDK.

Each client request is read whole and forwarded over a new upstream connection; the answer is
relayed with `Connection: close`. A fault, armed for the next request a predicate matches, is one of:

- `drop`: the request reaches the server, which acts on it, but its answer never reaches the
  client (the connection closes): a lost response;
- `refuse`: the connection closes before the request reaches the server;
- `answer`: the proxy answers itself with the given raw HTTP response (an error a gateway or the
  service gives), and the server never sees the request.

`down = True` refuses every connection until it is set back.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names


@dataclass
class _Fault:
    match: Callable[[Request], bool]
    action: str
    answer: bytes = b""


@dataclass
class FaultProxy:
    upstream: tuple[str, int]
    port: int = 0
    down: bool = False
    injected: list[str] = field(default_factory=list)  # "<action> <method> <path>" per fault applied
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, match: Callable[[Request], bool], action: str, answer: bytes = b"") -> None:
        """Apply `action` to the next request `match` accepts (once)."""
        with self._lock:
            self._faults.append(_Fault(match, action, answer))

    def _take(self, req: Request) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.match(req):
                    self._faults.remove(f)
                    self.injected.append(f"{f.action} {req.method} {req.path}")
                    return f
        return None

    def _serve(self, client: socket.socket) -> None:
        with client:
            if self.down:
                return
            got = _read_request(client)
            if got is None:
                return
            req, raw = got
            fault = self._take(req)
            if fault is not None and fault.action == "refuse":
                return
            if fault is not None and fault.action == "answer":
                client.sendall(fault.answer)
                return
            with socket.create_connection(self.upstream, timeout=30) as up:
                up.sendall(raw)
                answer = _read_all(up)
            if fault is None:  # "drop": the server acted, the client never hears it
                client.sendall(_closing(answer))


def _read_request(sock: socket.socket) -> tuple[Request, bytes] | None:
    """One request (head and Content-Length body), re-framed for a one-shot upstream connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("expect", "").lower() == "100-continue":
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    size = int(headers.get("content-length", "0"))
    while len(body) < size:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    kept = [line for line in lines[1:] if line.split(":", 1)[0].strip().lower() not in ("connection", "expect")]
    raw = "\r\n".join([lines[0], *kept, "Connection: close"]).encode("latin-1") + b"\r\n\r\n" + body
    return Request(method, path, headers), raw


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _closing(answer: bytes) -> bytes:
    head, sep, body = answer.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + sep + body


@contextmanager
def fault_proxy(upstream_endpoint: str) -> Iterator[FaultProxy]:
    """A proxy to `http://host:port` on a free loopback port, stopped afterwards."""
    host, port = upstream_endpoint.removeprefix("http://").rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = FaultProxy((host, int(port)), listener.getsockname()[1])
    stop = threading.Event()

    listener.settimeout(0.2)

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(30)
            threading.Thread(target=proxy._serve, args=(client,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def s3_error(status: str, code: str, message: str) -> bytes:
    """A raw S3 error answer (`400 Bad Request`, `ExpiredToken`, ...)."""
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'.encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body
