"""Class data sharing plans (framework/runtime/cds.py): dump once, then use; one dumper at a time;
what dead processes left is swept; off by LAKE_CDS=0. The JVM side is tests/integration/test_class_sharing.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from framework.runtime import cds


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LAKE_CDS_DIR", str(tmp_path / "cds"))
    monkeypatch.delenv("LAKE_CDS", raising=False)
    return tmp_path / "cds"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_no_archive_dumps_one_then_uses_it(where: Path, tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"x")
    first = cds.plan([str(jar)], "4g")
    assert first is not None and first.dump_to is not None and not first.archive.exists()
    assert f"-XX:ArchiveClassesAtExit={first.dump_to}" in first.options and "-Xlog:cds=off" in first.options
    # While this process dumps, another one (same key) runs without CDS.
    assert cds.plan([str(jar)], "4g") is not None  # same pid: its own marker does not block it
    first.dump_to.write_bytes(b"archive")
    os.replace(first.dump_to, first.archive)
    used = cds.plan([str(jar)], "4g")
    assert used is not None and used.dump_to is None and f"-XX:SharedArchiveFile={first.archive}" in used.options
    assert "-Xshare:auto" in used.options  # a mismatch makes Java ignore it, not fail


def test_the_key_follows_the_class_path_and_heap(where: Path, tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"x")
    k = cds.key([str(jar)], "4g")
    assert cds.key([str(jar)], "8g") != k
    assert cds.key([str(jar), str(tmp_path / "b.jar")], "4g") != k
    jar.write_bytes(b"a newer jar")
    assert cds.key([str(jar)], "4g") != k


def test_one_dumper_at_a_time_and_dead_ones_are_swept(where: Path, tmp_path: Path) -> None:
    where.mkdir(parents=True)
    stem = cds.key([], "4g")
    alive = where / f"{stem}.{os.getppid()}.dumping"  # a live process (pytest's parent) is dumping
    alive.touch()
    assert cds.plan([], "4g") is None
    alive.unlink()
    dead = _dead_pid()
    leftovers = [where / f"{stem}.{dead}.dumping", where / f"{stem}.{dead}.tmp"]
    for p in leftovers:
        p.write_bytes(b"half")
    p2 = cds.plan([], "4g")
    assert p2 is not None and p2.dump_to is not None
    assert not any(p.exists() for p in leftovers)


def test_off_by_environment(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_CDS", "0")
    assert cds.plan([], "4g") is None and not where.exists()


def test_keeps_the_newest_archives(where: Path) -> None:
    where.mkdir(parents=True)
    for i in range(cds.KEEP + 2):
        a = where / f"k{i}.jsa"
        a.write_bytes(b"x")
        os.utime(a, (1_000_000 + i, 1_000_000 + i))
    cds.plan([], "4g")
    assert sorted(p.name for p in where.glob("*.jsa")) == sorted(f"k{i}.jsa" for i in range(2, cds.KEEP + 2))
