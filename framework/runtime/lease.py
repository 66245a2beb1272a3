"""A project lock on S3: a lease object written with S3's conditional writes.

flock means nothing on an object store. S3 (and S3-compatible servers such as MinIO or moto)
accept `If-None-Match: *` (create only if absent) and `If-Match: <etag>` (replace only if
unchanged) on PUT, and `If-Match` on DELETE: enough for a lock that two processes, on any hosts,
cannot both take. The lock is `<warehouse>/_lake/locks/<name>.lock`, holding the holder's
LockHolder JSON: who holds it, the holder's lease length and a token of this holding.

- The holder renews it (a conditional rewrite, the renewal count in the body) every third of
  its lease. A lease not renewed for a whole lease of its holder (the `lease_seconds` in the
  object, not the contender's own setting), judged by the server's own clock (its
  `Last-Modified` against the `Date` of the answer, so no two hosts' clocks are compared),
  belongs to a dead holder and is taken over with one conditional write, which only one
  contender can win.
- Any failed request (a dropped connection, a timeout, an error answer) is retried with backoff
  for as long as the lease lasts; botocore does not retry on its own, so every attempt is seen
  here. A conditional write that fails its condition is read back: an object holding exactly
  what this process wrote means an earlier attempt went through and its answer was lost, so the
  lease is still ours.
- The holder does not trust a lease it cannot prove: `problem()` reports it lost (taken over),
  its renewer stopped, or less than a third of it left (renewals failing, or the process was
  paused). `framework.runtime.lock.assert_held` asks that before every commit.

Hudi's StorageBasedLockProvider works the same way; this one also covers what Hudi does not
lock (ingest checkpoints, the dead letter, a whole `lake run`). It talks to S3 with boto3 and the
standard AWS credential chain (environment, profile, instance role), at the endpoint the Spark
settings name (`spark.hadoop.fs.s3a.endpoint`, path-style access): one place to configure.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from framework.errors import LakeError
from framework.runtime.location import Location
from models.records import LockHolder

T = TypeVar("T")
# Answers that mean "the condition failed" (another object is there, or none is), not "try again".
_CONDITION_FAILED = ("PreconditionFailed", "412", "NoSuchKey", "404")
# How long taking a lease (or reading its holder for a message) keeps retrying a failing S3.
_PATIENCE = 30.0


@dataclass(frozen=True)
class S3Endpoint:
    url: str | None  # None: AWS itself
    path_style: bool
    region: str | None


def s3_endpoint(conf: dict[str, str], bucket: str) -> S3Endpoint:
    """Where the s3a file system of these Spark settings sends requests for `bucket` (a per-bucket
    `fs.s3a.bucket.<b>.*` setting wins over the global one)."""

    def get(key: str) -> str | None:
        return conf.get(f"spark.hadoop.fs.s3a.bucket.{bucket}.{key}") or conf.get(f"spark.hadoop.fs.s3a.{key}")

    url = get("endpoint")
    if url and "://" not in url:
        ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
        url = ("https://" if ssl else "http://") + url
    return S3Endpoint(url=url, path_style=(get("path.style.access") or "false").lower() == "true",
                      region=get("endpoint.region"))


@dataclass(frozen=True)
class _Seen:
    holder: LockHolder | None  # None: not a holder this version of lake reads
    etag: str
    age: float  # seconds since the last write, by the server's clock
    text: str


class _Unanswered(Exception):
    """S3 did not answer (or kept failing) until the deadline; the message is the last error."""


class S3Lease:
    """One named lease object; `try_acquire` never waits (`lock.hold` polls)."""

    def __init__(self, lock_dir: Location, name: str, safe: str, lease_seconds: int, endpoint: S3Endpoint) -> None:
        self.name = name
        self.path = lock_dir / f"{safe}.lock"
        self.where = str(self.path)
        self.stale: LockHolder | None = None
        self._lease = lease_seconds
        self._seen_lease = lease_seconds  # the lease of the last holder seen (for messages)
        self._bucket, self._key = self.path.authority, self.path.key
        self._client = _client(endpoint, lease_seconds)
        self._etag: str | None = None
        self._me: LockHolder | None = None
        self._renewed_at = 0.0  # monotonic time the last successful write was first sent
        self._lost: str | None = None
        self._error: str | None = None  # the last failed request
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def on_death(self) -> str:
        return f"its lease expires {self._seen_lease} s after its last renewal"

    @property
    def lost(self) -> bool:
        return self._lost is not None

    def holder(self) -> LockHolder | None:
        try:
            got = self._get(time.monotonic() + _PATIENCE)
        except _Unanswered:
            return None  # for a message only: "locked by another lake process"
        return got.holder if got else None

    def try_acquire(self, command: str) -> bool:
        self._stop.clear()
        me = LockHolder(pid=os.getpid(), host=socket.gethostname(), command=command, since=datetime.now(timezone.utc),
                        lease_seconds=self._lease, token=uuid.uuid4().hex, renewals=0)
        body = me.model_dump_json()
        deadline = time.monotonic() + _PATIENCE  # nothing is held yet: no lease to outlive
        try:
            etag, sent, got = self._put(body, deadline, IfNoneMatch="*")
            if etag is None:
                if got is None:
                    return False  # released between our PUT and GET: the next poll takes it
                if got.age < self._seen_lease:
                    return False
                etag, sent, _ = self._put(body, deadline, IfMatch=got.etag)  # take over the dead holder's lease
                if etag is None:
                    return False
                self.stale = got.holder
        except _Unanswered as e:
            raise LakeError(f"S3 did not answer for the lock {self.where}: {e}",
                            fix="check the network to S3, the AWS credentials (environment, profile or instance role) "
                                "and the s3a endpoint in spark.conf") from None
        self._etag, self._me, self._renewed_at, self._lost, self._error = etag, me, sent, None, None
        self._renewer = threading.Thread(target=self._renew, name=f"lake-lease-{self.name}", daemon=True)
        self._renewer.start()
        return True

    def problem(self) -> str | None:
        """Why this process can no longer count on holding the lease; None while it holds it with
        at least a third of the lease left (or does not hold it at all)."""
        if self._etag is None:
            return None
        if self._lost is not None:
            return self._lost
        if self._renewer is None or not self._renewer.is_alive():
            return "its renewal thread has stopped"
        left = self._renewed_at + self._lease - time.monotonic()
        if left < self._lease / 3:
            why = f"renewing it fails: {self._error}" if self._error else "this process was paused or its renewal is late"
            return f"only {max(left, 0.0):.0f} s of its {self._lease} s lease are left ({why})"
        return None

    def release(self) -> None:
        if self._etag is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(self._lease)
        if self._lost is None:
            with contextlib.suppress(Exception):  # taken over or unreachable: the lease expires by itself
                self._client.delete_object(Bucket=self._bucket, Key=self._key, IfMatch=self._etag)
        self._etag = None

    def _renew(self) -> None:
        """Renew every third of the lease until released; never ends silently while held."""
        try:
            while not self._stop.wait(max(0.0, self._renewed_at + self._lease / 3 - time.monotonic())):
                if not self._renew_once():
                    return
        except Exception as e:  # a bug, not S3: still never a silent death
            self._lose(f"its renewal failed: {type(e).__name__}: {e}")

    def _renew_once(self) -> bool:
        assert self._me is not None and self._etag is not None
        me = self._me.model_copy(update={"renewals": (self._me.renewals or 0) + 1})
        try:
            etag, sent, _ = self._put(me.model_dump_json(), self._renewed_at + self._lease, IfMatch=self._etag)
        except _Unanswered as e:
            if not self._stop.is_set():
                self._lose(f"it could not be renewed for its whole lease of {self._lease} s ({e}); "
                           "another process may hold it now")
            return False
        if etag is None:
            self._lose("another process took it over (this one did not renew it in time)")
            return False
        self._etag, self._me, self._renewed_at, self._error = etag, me, sent, None
        return True

    def _lose(self, why: str) -> None:
        self._lost = why
        print(f"lake: lost the lock {self.name} ({self.where}): {why}; this process commits nothing more under it",
              file=sys.stderr)

    def _put(self, body: str, deadline: float, **cond: str) -> tuple[str | None, float, _Seen | None]:
        """Write `body` under a condition, retried until `deadline`: the new ETag (None when the
        condition failed against an object that is not ours), when the first attempt was sent,
        and the object read back when the condition failed (None: there is none)."""
        from botocore.exceptions import ClientError

        first = time.monotonic()
        try:
            r = self._call(deadline, self._client.put_object, Bucket=self._bucket, Key=self._key, Body=body.encode(),
                           ContentType="application/json", **cond)
            return str(r["ETag"]), first, None
        except ClientError:  # the condition failed (anything else was retried or became _Unanswered)
            got = self._get(deadline)
            if got is not None and got.text == body:
                return got.etag, first, got  # an earlier attempt went through and its answer was lost: ours
            return None, first, got

    def _get(self, deadline: float) -> _Seen | None:
        """The lease object as it is now (holder, ETag, age by the server's clock); None if absent."""
        from botocore.exceptions import ClientError

        try:
            r = self._call(deadline, self._client.get_object, Bucket=self._bucket, Key=self._key)
        except ClientError:
            return None
        text = r["Body"].read().decode("utf-8", "replace")
        now = parsedate_to_datetime(r["ResponseMetadata"]["HTTPHeaders"]["date"])
        try:
            holder: LockHolder | None = LockHolder.model_validate_json(text)
        except (ValidationError, json.JSONDecodeError):
            holder = None
        if holder is not None and holder.lease_seconds:
            self._seen_lease = holder.lease_seconds  # honour the holder's lease, not our own setting
        else:
            self._seen_lease = self._lease
        return _Seen(holder, str(r["ETag"]), (now - r["LastModified"]).total_seconds(), text)

    def _call(self, deadline: float, fn: Callable[..., T], **kw: Any) -> T:
        """`fn(**kw)`, retried with backoff on any error but a failed condition until `deadline`."""
        delay = 0.2
        while True:
            try:
                return fn(**kw)
            except Exception as e:
                if _code(e) in _CONDITION_FAILED:
                    raise
                self._error = f"{type(e).__name__}: {e}"
            if time.monotonic() + delay >= deadline:
                raise _Unanswered(self._error)
            if self._stop.wait(delay):
                raise _Unanswered("released while retrying")
            delay = min(delay * 2, max(0.5, self._lease / 10))


def _code(e: Exception) -> str | None:
    response = getattr(e, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else None


def _client(endpoint: S3Endpoint, lease_seconds: int) -> Any:
    """A client that does not retry by itself (S3Lease retries, within the lease) and gives up on
    a silent server well within a renewal interval."""
    import boto3
    from botocore.config import Config

    wait = max(2.0, min(10.0, lease_seconds / 6))
    cfg = Config(s3={"addressing_style": "path" if endpoint.path_style else "auto"}, retries={"max_attempts": 1, "mode": "standard"},
                 connect_timeout=wait, read_timeout=wait)
    return boto3.client("s3", endpoint_url=endpoint.url, region_name=endpoint.region, config=cfg)
