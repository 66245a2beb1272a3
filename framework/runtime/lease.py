"""A project lock on S3: a lease object written with S3's conditional writes.

flock means nothing on an object store. S3 (and S3-compatible servers such as MinIO or moto)
accept `If-None-Match: *` (create only if absent) and `If-Match: <etag>` (replace only if
unchanged) on PUT, and `If-Match` on DELETE: enough for a lock that two processes, on any hosts,
cannot both take. The lock is `<warehouse>/_lake/locks/<name>.lock`, holding the holder's
LockHolder JSON. Its holder renews it (a conditional rewrite) every third of the lease; a lock
not renewed for a whole lease, judged by the server's own clock (its `Last-Modified` against the
`Date` of the answer, so no two hosts' clocks are compared), belongs to a dead holder and is
taken over with one conditional write, which only one contender can win.

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
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from framework.errors import LakeError
from framework.runtime.location import Location
from models.records import LockHolder


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


class S3Lease:
    """One named lease object; `try_acquire` never waits (`lock.hold` polls)."""

    def __init__(self, lock_dir: Location, name: str, safe: str, lease_seconds: int, endpoint: S3Endpoint) -> None:
        self.name = name
        self.path = lock_dir / f"{safe}.lock"
        self.where = str(self.path)
        self.on_death = f"its lease expires {lease_seconds} s after its last renewal"
        self.stale: LockHolder | None = None
        self.lost = False  # the lease was taken over while held (this process stalled a whole lease)
        self._lease = lease_seconds
        self._bucket, self._key = self.path.authority, self.path.key
        self._client = _client(endpoint)
        self._etag: str | None = None
        self._body = ""
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def holder(self) -> LockHolder | None:
        got = self._get()
        return got[0] if got else None

    def try_acquire(self, command: str) -> bool:
        body = LockHolder(pid=os.getpid(), host=socket.gethostname(), command=command, since=datetime.now(timezone.utc)).model_dump_json()
        etag = self._put(body, IfNoneMatch="*")
        if etag is None:
            got = self._get()
            if got is None:
                return False  # released between our PUT and GET: the next poll takes it
            holder, seen, age = got
            if age < self._lease:
                return False
            etag = self._put(body, IfMatch=seen)  # take over the dead holder's lease
            if etag is None:
                return False
            self.stale = holder
        self._etag, self._body = etag, body
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name=f"lake-lease-{self.name}", daemon=True)
        self._renewer.start()
        return True

    def release(self) -> None:
        if self._etag is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        from botocore.exceptions import ClientError

        with contextlib.suppress(ClientError):  # taken over (self.lost) or already gone: not ours to delete
            self._client.delete_object(Bucket=self._bucket, Key=self._key, IfMatch=self._etag)
        self._etag = None

    def _renew(self) -> None:
        while not self._stop.wait(self._lease / 3):
            etag = self._put(self._body, IfMatch=self._etag or "")
            if etag is None:
                self.lost = True
                print(f"lake: lost the lock {self.name} ({self.where}): another process took it over after this one "
                      f"did not renew it for {self._lease} s", file=sys.stderr)
                return
            self._etag = etag

    def _put(self, body: str, **cond: str) -> str | None:
        """The new ETag, or None when the condition failed."""
        from botocore.exceptions import ClientError

        try:
            r = self._client.put_object(Bucket=self._bucket, Key=self._key, Body=body.encode(), ContentType="application/json", **cond)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409", "404"):
                return None
            raise _s3_error(self.where, e) from None
        return str(r["ETag"])

    def _get(self) -> tuple[LockHolder | None, str, float] | None:
        """Holder, ETag and age in seconds (server clock) of the lease object; None if absent."""
        from botocore.exceptions import ClientError

        try:
            r = self._client.get_object(Bucket=self._bucket, Key=self._key)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code", "") in ("NoSuchKey", "404"):
                return None
            raise _s3_error(self.where, e) from None
        text = r["Body"].read().decode("utf-8", "replace")
        now = parsedate_to_datetime(r["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - r["LastModified"]).total_seconds()
        try:
            holder: LockHolder | None = LockHolder.model_validate_json(text)
        except (ValidationError, json.JSONDecodeError):
            holder = None
        return holder, str(r["ETag"]), age


def _client(endpoint: S3Endpoint) -> Any:
    import boto3
    from botocore.config import Config

    cfg = Config(s3={"addressing_style": "path" if endpoint.path_style else "auto"}, retries={"max_attempts": 5, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint.url, region_name=endpoint.region, config=cfg)


def _s3_error(where: str, e: Any) -> LakeError:
    err = e.response.get("Error", {})
    return LakeError(f"S3 refused the lock {where}: {err.get('Code', '?')} {err.get('Message', '')}".strip(),
                     fix="check the AWS credentials (environment, profile or instance role) and the s3a endpoint in spark.conf")
