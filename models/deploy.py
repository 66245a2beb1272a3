"""Where a project runs: warehouse and CDC locations (local or Hadoop URIs) and its locks."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from models.base import StrictModel

# A validator's ValueError text "problem" + FIX_SEPARATOR + "fix" is reported as problem and fix.
FIX_SEPARATOR = "\nfix: "

# `s3a:/bucket/x` (one slash) would be the local folder `s3a:/bucket/x`.
_HALF_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/(?!/)")
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)")


def check_location(v: str, example: str) -> str:
    """A local path or a `scheme://authority/path` URI; never half a URI."""
    if not v.strip():
        raise ValueError(f"an empty path{FIX_SEPARATOR}give a folder or a URI, e.g. {example}")
    if _HALF_URI.match(v) and not re.match(r"^[A-Za-z]:[/\\]", v):
        scheme = v.split(":", 1)[0]
        raise ValueError(f"{v!r} is half a URI (one slash after `{scheme}:`), which would be a local folder named {scheme}:"
                         f"{FIX_SEPARATOR}write {scheme}://{v.split(':/', 1)[1].lstrip('/')}")
    m = _URI_SCHEME.match(v)
    if m and m[1].lower() in ("s3a", "s3", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs") and not m[2]:
        raise ValueError(f"{v!r} names no bucket or container{FIX_SEPARATOR}write {m[1]}://BUCKET/path")
    return v


class LockSettings(StrictModel):
    """`locks:` in lake.yaml: how two lake processes writing one table are kept apart."""

    kind: Literal["auto", "flock", "s3", "none"] = Field(default="auto", description="`auto`: flock for a local warehouse, an S3 lease "
                                                         "for s3a:// (s3://, s3n://); `none`: no lock (one scheduler runs every write), "
                                                         "the only choice for other file systems today.")
    lease_seconds: int = Field(default=60, ge=10, le=3600, description="An S3 lease not renewed for this long is taken over (its "
                               "holder died); the holder renews it every third of it.")


def check_lock_service(warehouse: str, locks: LockSettings) -> None:
    """A lock kind that can serve the warehouse's file system (`locks.kind: auto` needs one)."""
    m = _URI_SCHEME.match(warehouse)
    scheme = m[1].lower() if m else "file"
    if locks.kind == "auto" and scheme not in ("file", "s3a", "s3", "s3n"):
        raise ValueError(
            f"lake has no lock service for a {scheme}:// warehouse (flock needs a local disk, the S3 lease an S3 bucket)"
            f"{FIX_SEPARATOR}set `locks: {{kind: none}}` in lake.yaml if one scheduler runs every lake write; nothing else then keeps two writers of a table apart")
    if locks.kind == "flock" and scheme != "file":
        raise ValueError(f"`locks.kind: flock` needs a local warehouse, not {warehouse}{FIX_SEPARATOR}use `kind: auto`")
    if locks.kind == "s3" and scheme not in ("s3a", "s3", "s3n"):
        raise ValueError(f"`locks.kind: s3` needs an S3 warehouse (s3a://bucket/...), not {warehouse}{FIX_SEPARATOR}use `kind: auto`")
