"""The engine's stdout and stderr: while a command runs, what lake writes goes to its client;
between commands, to the engine's log. They stand in for `sys.stdout` / `sys.stderr` from the
engine's start, so every handler and console bound to them (logging, rich) follows the client."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
from typing import Any, TextIO

from framework.engine import wire


class _Client:
    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.tty = {"stdout": False, "stderr": False}
        self.lock = threading.Lock()  # a frame is written whole, whichever thread writes


CLIENT = _Client()


class _Bytes(io.RawIOBase):
    def __init__(self, owner: ClientStream) -> None:
        self.owner = owner

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.owner.send(bytes(data))
        return len(data)


class ClientStream(io.TextIOBase):
    """`sys.stdout` (kind b"o") or `sys.stderr` (b"e") of the engine."""

    def __init__(self, kind: bytes, name: str, fallback: TextIO) -> None:
        self.kind, self.name, self.fallback = kind, name, fallback
        self.buffer = io.BufferedWriter(_Bytes(self), buffer_size=1)  # type: ignore[arg-type]

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "replace"

    def writable(self) -> bool:
        return True

    def send(self, data: bytes) -> None:
        sock = CLIENT.sock
        if sock is None:
            self.fallback.buffer.write(data)
            self.fallback.flush()
            return
        with CLIENT.lock, contextlib.suppress(OSError):  # the client went away: the command is being cancelled
            wire.send(sock, self.kind, data)

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a real text stream: click tells text from binary streams by this
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            self.buffer.flush()
            self.send(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        self.buffer.flush()

    def isatty(self) -> bool:
        return bool(CLIENT.tty.get(self.name)) if CLIENT.sock is not None else False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("an engine's output goes to its client, not to a file descriptor")
