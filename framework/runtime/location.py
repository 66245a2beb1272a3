"""A place lake reads or writes: a local path or a Hadoop file system URI.

`pathlib.Path("s3a://bucket/wh")` is the local folder `s3a:/bucket/wh`, which is how an object
store warehouse once became a silent local directory. A `Location` keeps the scheme and the
authority, joins like a path (`loc / "ods" / "user"`), and prints as the string Spark and Hudi
take: an absolute local path, or the URI. Pure Python: config validation and planning use it
before any JVM exists.
"""

from __future__ import annotations

import re
from pathlib import Path

# RFC 3986 scheme, then "://": `s3a://b/x`, `hdfs://nn:8020/x`, `file:///x`.
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
# Schemes that are object stores: no directories, no atomic rename, no flock.
OBJECT_STORES = frozenset({"s3a", "s3", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "cosn", "obs"})


class Location:
    """An absolute local path, or `scheme://authority/path` of a Hadoop file system."""

    __slots__ = ("scheme", "authority", "path")

    def __init__(self, scheme: str | None, authority: str, path: str) -> None:
        self.scheme = scheme  # None: the local file system
        self.authority = authority
        self.path = "/" + path.strip("/") if path.strip("/") else "/"

    @classmethod
    def parse(cls, text: str | Path, base: Path | None = None) -> Location:
        """`text` as a location; a relative local path is taken relative to `base` (or the cwd).
        `file:///x` is the local path /x."""
        s = str(text)
        m = _URI.match(s)
        if m is None:
            p = Path(s).expanduser()
            if not p.is_absolute():
                p = (base or Path.cwd()) / p
            return cls(None, "", str(p.resolve()))
        scheme = m["scheme"].lower()
        authority, _, path = m["rest"].partition("/")
        if scheme == "file":
            return cls(None, "", "/" + path)
        return cls(scheme, authority, path)

    @property
    def is_local(self) -> bool:
        return self.scheme is None

    @property
    def is_object_store(self) -> bool:
        return self.scheme in OBJECT_STORES

    @property
    def local(self) -> Path:
        """The local path; only for local locations."""
        if self.scheme is not None:
            raise ValueError(f"{self} is not on the local file system")
        return Path(self.path)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return Location(self.scheme, self.authority, self.path.rstrip("/").rsplit("/", 1)[0])

    @property
    def key(self) -> str:
        """The path without its leading slash: an object store's key."""
        return self.path.lstrip("/")

    def __truediv__(self, part: str) -> Location:
        return Location(self.scheme, self.authority, self.path.rstrip("/") + "/" + part.strip("/"))

    def __str__(self) -> str:
        return self.path if self.scheme is None else f"{self.scheme}://{self.authority}{self.path}"

    def __repr__(self) -> str:
        return f"Location({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def is_relative_to(self, other: Location) -> bool:
        return self.scheme == other.scheme and self.authority == other.authority and (
            self.path == other.path or self.path.startswith(other.path.rstrip("/") + "/"))


def as_location(where: Location | Path | str) -> Location:
    return where if isinstance(where, Location) else Location.parse(where)
