"""Project locks: one writer per table and per ingest checkpoint, across processes.

Each lock is a file `<warehouse>/_lake/locks/<name>.lock` held with ``fcntl.flock``. The kernel
drops a flock when its process exits, however it exits (SIGKILL, OOM, a crashed JVM parent), so a
dead holder never leaves a lock behind that needs cleaning: the next process simply gets it. The
file also carries the holder (pid, host, command, since) as JSON, written after locking and
cleared on release; a process that finds a holder recorded in a free lock file knows that holder
died without releasing and reports the take-over.

Why not the `filelock` package: on Linux it is the same flock, but it records no holder (the
error must name one) and deletes the file on release, which lets two processes lock two different
inodes of the same path. flock needs a POSIX filesystem (local disk; NFS v4 maps it to byte-range
locks). An S3 warehouse gets a lease object instead (framework/runtime/lease.py); `locks: {kind: none}`
in lake.yaml turns locking off for file systems that have neither.

A flock cannot be lost while its process lives; a lease can (its holder paused, or S3 out of
reach, for a whole lease). Every lock a process holds is registered while `hold` holds it, and
`assert_held` (called just before each Hudi commit and each streaming checkpoint commit) stops a
process that can no longer prove it holds them: DESIGN.md "One writer".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import ValidationError

from framework.errors import LakeError
from framework.runtime.location import Location
from models.records import LockHolder

if TYPE_CHECKING:
    from models.config import LockSettings

_POLL_SECONDS = 0.1
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class LockHeldError(LakeError):
    """Another process holds a lock this command needs."""


class LockLostError(LakeError):
    """This process can no longer prove it holds a lock it took (an S3 lease lost or expiring, a lock
    file deleted or replaced): it stops before its next commit (DESIGN §10)."""


def table_lock(table: str) -> str:
    """Lock name of a table lake writes (an ODS table or a model): one writer at a time."""
    return f"table-{table}"


def ingest_lock(checkpoint: str) -> str:
    """Lock name of an ingest streaming checkpoint: one stream advances it at a time."""
    return f"ingest-{checkpoint}"


def replay_lock() -> str:
    """Lock name of the dead letter's replay journal: one `lake dead-letter replay` or `purge` at a time."""
    return "dead-letter-replay"


class Lock(Protocol):
    name: str
    where: str  # the lock's file or object, for messages
    @property
    def on_death(self) -> str:
        """What happens to the lock when its holder dies."""
        ...
    stale: LockHolder | None

    def holder(self) -> LockHolder | None: ...
    def try_acquire(self, command: str) -> bool: ...
    def release(self) -> None: ...
    def problem(self) -> str | None:
        """Why the holder can no longer count on the lock; None while it holds it safely."""
        ...


class FileLock:
    """One named lock file; `acquire` polls flock until a deadline."""

    def __init__(self, lock_dir: Path, name: str) -> None:
        self.name = name
        self.path = lock_dir / f"{_SAFE.sub('_', name)}.lock"
        self.where = str(self.path)
        self.on_death = "its lock is released when it exits"
        self._fd: int | None = None
        self.stale: LockHolder | None = None  # a dead holder found in the file when acquired

    def holder(self) -> LockHolder | None:
        """Who holds (or last held without releasing) this lock, as recorded in the file."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not text:
            return None
        try:
            return LockHolder.model_validate_json(text)
        except ValidationError:
            return None  # being written right now

    def try_acquire(self, command: str) -> bool:
        """Take the lock if it is free; record this process as the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        self.stale = self.holder()  # a record left in a free lock: its process died holding it
        me = LockHolder(pid=os.getpid(), host=socket.gethostname(), command=command,
                        since=datetime.now(timezone.utc))
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.model_dump_json().encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return True

    def problem(self) -> str | None:
        """The kernel keeps a flock until the process exits, but a lock file deleted or replaced
        while held keeps nobody else out any more."""
        if self._fd is None:
            return None
        try:
            same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            same = False
        return None if same else "its lock file was deleted or replaced while held"

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # a clean release leaves no holder behind
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def _make(lock_dir: Location, settings: LockSettings | None, spark_conf: dict[str, str]) -> Callable[[str], Lock] | None:
    """The lock of a name in `lock_dir`: flock on a local disk, an S3 lease in a bucket; None
    when locking is off (`locks: {kind: none}`)."""
    kind = settings.kind if settings is not None else "auto"
    if kind == "none":
        return None
    if lock_dir.is_local:
        return lambda n: FileLock(lock_dir.local, n)
    if lock_dir.scheme in ("s3a", "s3", "s3n"):
        from framework.runtime.lease import S3Lease, s3_endpoint

        endpoint = s3_endpoint(spark_conf, lock_dir.authority)
        lease = settings.lease_seconds if settings is not None else 60
        return lambda n: S3Lease(lock_dir, n, _SAFE.sub("_", n), lease, endpoint)
    raise LakeError(f"lake has no lock service for {lock_dir}",
                    fix="set `locks: {kind: none}` in lake.yaml if one scheduler runs every lake write")


@contextlib.contextmanager
def hold(
    lock_dir: Location | Path,
    names: Iterable[str],
    *,
    command: str,
    timeout: float,
    on_stale: Callable[[str, LockHolder], None] | None = None,
    settings: LockSettings | None = None,
    spark_conf: dict[str, str] | None = None,
) -> Iterator[list[Lock]]:
    """Hold every named lock for the body of the `with`, waiting up to `timeout` seconds in all.

    Locks are taken in sorted order, so two commands needing overlapping sets cannot deadlock.
    `settings` (lake.yaml `locks:`) and `spark_conf` (for an S3 lease's endpoint) come from the
    project.

    Raises:
        LockHeldError: a lock is still held when the time is up; names the holder and the fix.
    """
    where = lock_dir if isinstance(lock_dir, Location) else Location.parse(lock_dir)
    make = _make(where, settings, spark_conf or {})
    if make is None:
        yield []
        return
    locks = [make(n) for n in sorted(set(names))]
    deadline = time.monotonic() + max(timeout, 0.0)
    taken: list[Lock] = []
    try:
        for lock in locks:
            while not lock.try_acquire(command):
                if time.monotonic() >= deadline:
                    raise _held_error(lock, timeout)
                time.sleep(_POLL_SECONDS)
            taken.append(lock)
            with _guard:
                _held.append(lock)
            if lock.stale is not None and on_stale is not None:
                on_stale(lock.name, lock.stale)
        yield taken
    finally:
        for lock in reversed(taken):
            with _guard:
                _held.remove(lock)
            lock.release()


_held: list[Lock] = []  # every lock this process holds now (any thread: Spark runs foreachBatch in its own)
_guard = threading.Lock()


def assert_held(what: str = "the next commit") -> None:
    """Stop `what` (a commit about to happen) unless this process still safely holds every lock it
    took: a lease lost, its renewal stopped, or less than a third of it left raises. Call it just
    before anything that commits; with no lock held (or locks off) it does nothing.

    Raises:
        LockLostError: names the lock, why, and what to do.
    """
    with _guard:
        held = list(_held)
    for lock in held:
        why = lock.problem()
        if why is not None:
            raise LockLostError(
                f"{what} was stopped before committing: this process no longer safely holds the lock {lock.name} "
                f"({lock.where}): {why}",
                fix="nothing of this step was committed, and what committed before is consistent: run the command again "
                    "(an ingest retries the batch). If it repeats, check this host's network to S3 and long pauses "
                    "(GC, a suspended VM), or raise `locks.lease_seconds` in lake.yaml")


def _held_error(lock: Lock, timeout: float) -> LockHeldError:
    h = lock.holder()
    what = lock.name.replace("table-", "table ", 1).replace("ingest-", "ingest checkpoint ", 1)
    waited = f"after waiting {timeout:g} s" if timeout > 0 else "(--lock-timeout 0: not waiting)"
    if h is None:
        return LockHeldError(f"{what} is locked by another lake process {waited} ({lock.where})",
                             fix="wait for it to finish, or pass --lock-timeout SECONDS to wait longer")
    age = (datetime.now(timezone.utc) - h.since).total_seconds()
    same_host = h.host == socket.gethostname()
    stop = f"kill {h.pid}" if same_host else f"on {h.host}: kill {h.pid}"
    return LockHeldError(
        f"{what} is locked by pid {h.pid} on {h.host} running `{h.command}` since "
        f"{h.since.isoformat(timespec='seconds')} ({age:.0f} s ago) {waited}",
        fix=(f"wait for it to finish, or pass --lock-timeout SECONDS to wait longer; if it hangs, "
             f"stop it ({stop}): {lock.on_death}"),
    )

