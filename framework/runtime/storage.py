"""File operations on the warehouse, on the local disk or through Hadoop's FileSystem.

Everything lake writes beside its Hudi tables (run records, quality results, checkpoint ids,
table listings and sizes) goes through a `Storage`. A local warehouse uses plain Python file
calls, so commands that need no Spark (`lake runs`, `lake plan` before the first build) start no
JVM. Any other location (`s3a://`, `hdfs://`, ...) goes through Hadoop's FileSystem in the Spark
driver's JVM, configured by the session's `spark.hadoop.*` settings: the same code, jars and
credentials (the AWS provider chain for s3a) that Spark and Hudi use for the tables.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from framework.errors import LakeError
from framework.runtime.location import Location


class Storage(Protocol):
    def exists(self, loc: Location) -> bool: ...
    def is_dir(self, loc: Location) -> bool: ...
    def children(self, loc: Location) -> list[Location]:
        """Entries directly under `loc`, sorted; empty when it does not exist."""
        ...
    def files(self, loc: Location) -> Iterator[tuple[Location, int]]:
        """Every file under `loc` (recursively) with its size in bytes."""
        ...
    def stats(self, loc: Location) -> Iterator[tuple[Location, int, int]]:
        """Every file under `loc` (recursively) with its size in bytes and modification time (epoch ms)."""
        ...
    def read_text(self, loc: Location) -> str: ...
    def read_bytes(self, loc: Location) -> bytes: ...
    def write_text(self, loc: Location, text: str) -> None:
        """Replace `loc` with `text` whole: a reader sees the old or the new content, never part."""
        ...
    def delete(self, loc: Location) -> None:
        """Remove a file or a directory tree; nothing when absent."""
        ...
    def rename(self, src: Location, dst: Location) -> None:
        """Move a file or directory tree to `dst` (which must not exist)."""
        ...

    def mkdirs(self, loc: Location) -> None:
        """Make a directory and its parents (an object store keeps an empty one as a marker)."""
        ...

    def copy(self, src: Location, dst: Location) -> None:
        """Copy one file to `dst`, replacing it (on an object store a server-side copy: the
        object appears whole or not at all)."""
        ...


class LocalStorage:
    def exists(self, loc: Location) -> bool:
        return loc.local.exists()

    def is_dir(self, loc: Location) -> bool:
        return loc.local.is_dir()

    def children(self, loc: Location) -> list[Location]:
        d = loc.local
        return [loc / p.name for p in sorted(d.iterdir())] if d.is_dir() else []

    def files(self, loc: Location) -> Iterator[tuple[Location, int]]:
        return ((f, size) for f, size, _ in self.stats(loc))

    def stats(self, loc: Location) -> Iterator[tuple[Location, int, int]]:
        for dirpath, _dirs, names in os.walk(loc.local):
            for n in names:
                p = Path(dirpath) / n
                with contextlib.suppress(FileNotFoundError):
                    st = p.stat()
                    yield Location(None, "", str(p)), st.st_size, st.st_mtime_ns // 1_000_000

    def read_text(self, loc: Location) -> str:
        return loc.local.read_text(encoding="utf-8")

    def read_bytes(self, loc: Location) -> bytes:
        return loc.local.read_bytes()

    def write_text(self, loc: Location, text: str) -> None:
        path = loc.local
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    def delete(self, loc: Location) -> None:
        import shutil

        p = loc.local
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)

    def rename(self, src: Location, dst: Location) -> None:
        dst.local.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src.local, dst.local)

    def mkdirs(self, loc: Location) -> None:
        loc.local.mkdir(parents=True, exist_ok=True)

    def copy(self, src: Location, dst: Location) -> None:
        import shutil

        dst.local.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.local.with_name(f".{dst.name}.{os.getpid()}.tmp")
        shutil.copyfile(src.local, tmp)
        os.replace(tmp, dst.local)


class HadoopStorage:
    """Hadoop's FileSystem through the active SparkSession's JVM (py4j)."""

    def __init__(self, sc: Any) -> None:
        self._jvm = sc._jvm
        self._conf = sc._jsc.hadoopConfiguration()

    def _fs(self, loc: Location) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(str(loc))
        return p.getFileSystem(self._conf), p

    def exists(self, loc: Location) -> bool:
        fs, p = self._fs(loc)
        return bool(fs.exists(p))

    def is_dir(self, loc: Location) -> bool:
        fs, p = self._fs(loc)
        return bool(fs.exists(p) and fs.getFileStatus(p).isDirectory())

    def children(self, loc: Location) -> list[Location]:
        fs, p = self._fs(loc)
        if not fs.exists(p):
            return []
        return sorted((loc / s.getPath().getName() for s in fs.listStatus(p)), key=str)

    def files(self, loc: Location) -> Iterator[tuple[Location, int]]:
        return ((f, size) for f, size, _ in self.stats(loc))

    def stats(self, loc: Location) -> Iterator[tuple[Location, int, int]]:
        fs, p = self._fs(loc)
        if not fs.exists(p):
            return
        it = fs.listFiles(p, True)
        while it.hasNext():
            s = it.next()
            yield Location.parse(s.getPath().toString()), int(s.getLen()), int(s.getModificationTime())

    def read_text(self, loc: Location) -> str:
        fs, p = self._fs(loc)
        stream = fs.open(p)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def read_bytes(self, loc: Location) -> bytes:
        fs, p = self._fs(loc)
        stream = fs.open(p)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_text(self, loc: Location, text: str) -> None:
        fs, p = self._fs(loc)
        data = bytearray(text.encode("utf-8"))
        if loc.is_object_store:
            # An object store PUT is atomic: the object appears whole when the stream closes.
            _write(fs, p, data)
            return
        tmp = self._jvm.org.apache.hadoop.fs.Path(str(loc.parent / f".{loc.name}.{os.getpid()}.{threading.get_ident()}.tmp"))
        _write(fs, tmp, data)
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise LakeError(f"could not rename {tmp} to {loc}", fix="check the file system's permissions")

    def delete(self, loc: Location) -> None:
        fs, p = self._fs(loc)
        if fs.exists(p):
            fs.delete(p, True)

    def rename(self, src: Location, dst: Location) -> None:
        fs, s = self._fs(src)
        _, d = self._fs(dst)
        fs.mkdirs(d.getParent())
        if not fs.rename(s, d):
            raise LakeError(f"could not rename {src} to {dst}", fix="check the file system's permissions")

    def mkdirs(self, loc: Location) -> None:
        fs, p = self._fs(loc)
        fs.mkdirs(p)

    def copy(self, src: Location, dst: Location) -> None:
        fs, s = self._fs(src)
        dfs, d = self._fs(dst)
        if not self._jvm.org.apache.hadoop.fs.FileUtil.copy(fs, s, dfs, d, False, True, self._conf):
            raise LakeError(f"could not copy {src} to {dst}", fix="check the file system's permissions")


def _write(fs: Any, path: Any, data: bytearray) -> None:
    out = fs.create(path, True)
    try:
        out.write(data)
    finally:
        out.close()


def storage_for(loc: Location) -> Storage:
    """The storage of `loc`: local files, or Hadoop's FileSystem in the running Spark driver."""
    if loc.is_local:
        return LocalStorage()
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context  # not getActiveSession(): that is per thread
    if sc is None:
        raise LakeError(
            f"{loc} is not on the local disk, and reading it needs Hadoop's file system in a Spark "
            "session, which this command had not started",
            fix="report this as a lake bug (a command touched a remote warehouse before starting Spark)",
        )
    return HadoopStorage(sc)
