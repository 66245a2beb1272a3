"""The engine's framing: each frame is one kind byte, a 4-byte big-endian length and the payload.

Client -> engine: `R` (the request, JSON), then `C` (cancel: the client was interrupted).
Engine -> client: `o` / `e` (bytes for stdout / stderr), `x` (the exit code, JSON), `n` (not
served here, JSON with the reason: the client runs the command itself).
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct(">cI")
MAX_FRAME = 64 * 1024 * 1024


class WireError(OSError):
    """The other side closed the connection or sent something that is not a frame."""


def send(sock: socket.socket, kind: bytes, payload: bytes = b"") -> None:
    sock.sendall(HEADER.pack(kind, len(payload)) + payload)


def send_json(sock: socket.socket, kind: bytes, value: Any) -> None:
    send(sock, kind, json.dumps(value).encode())


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise WireError("the connection closed mid-frame" if chunks or n != HEADER.size else "the connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> tuple[bytes, bytes]:
    kind, size = HEADER.unpack(_exactly(sock, HEADER.size))
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes is not lake's engine talking")
    return kind, _exactly(sock, size) if size else b""
