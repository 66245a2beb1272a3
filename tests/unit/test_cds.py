"""Class data sharing (framework/runtime/cds.py) without a JVM: an archive is used when it exists;
when none does, one detached warm-up is started (a lock naming it) and the run goes on without;
what dead warm-ups left is swept; off by LAKE_CDS=0. With a real JVM:
tests/integration/test_class_sharing.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def test_an_existing_archive_is_mapped(where: Path, tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"x")
    archive = cds.archive_for([str(jar)], "4g")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    opts = cds.options([str(jar)], "4g", {})
    assert opts[:2] == (f"-XX:SharedArchiveFile={archive}", "-Xshare:auto")  # a mismatch makes Java ignore it
    assert "-Xlog:cds=off" in opts  # nothing on stdout


def test_no_archive_starts_one_warmup_with_the_jvm_settings_only(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []
    real = subprocess.Popen

    def popen(cmd: list[str], **kw: object) -> subprocess.Popen[bytes]:
        started.append(cmd)
        return real([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"], **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(cds.subprocess, "Popen", popen)
    conf = {"spark.master": "local[2]", "spark.driver.memory": "4g", "spark.hadoop.fs.s3a.secret.key": "s3cr3t"}
    assert cds.options([], "4g", conf) == ()
    assert cds.options([], "4g", conf) == ()  # the first one's lock holds: no second warm-up
    (cmd,) = started
    assert cmd[1:3] == ["-m", "framework.runtime.cds_warmup"]
    lock = cds.archive_for([], "4g").with_suffix(".lock")
    assert lock.read_text().isdigit()
    log = cds.archive_for([], "4g").with_suffix(".log")
    for _ in range(100):
        if log.read_text():
            break
        time.sleep(0.05)
    assert "local[2]" in log.read_text() and "s3cr3t" not in log.read_text()  # what it was given on stdin


def test_the_key_follows_the_class_path_and_heap(where: Path, tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"x")
    k = cds.key([str(jar)], "4g")
    assert cds.key([str(jar)], "8g") != k
    assert cds.key([str(jar), str(tmp_path / "b.jar")], "4g") != k
    jar.write_bytes(b"a newer jar")
    assert cds.key([str(jar)], "4g") != k


def test_leftovers_of_dead_warmups_are_swept(where: Path) -> None:
    where.mkdir(parents=True)
    dead = _dead_pid()
    lock, tmp = where / "k.lock", where / f"k.{dead}.tmp"
    lock.write_text(str(dead))
    tmp.write_bytes(b"half an archive")
    live = where / "j.lock"
    live.write_text(str(os.getpid()))
    cds._sweep(where)
    assert not lock.exists() and not tmp.exists() and live.exists()


def test_off_by_environment(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_CDS", "0")
    assert cds.options([], "4g", {}) == () and not where.exists()


def test_keeps_the_newest_archives(where: Path) -> None:
    where.mkdir(parents=True)
    for i in range(cds.KEEP + 2):
        a = where / f"k{i}.jsa"
        a.write_bytes(b"x")
        os.utime(a, (1_000_000 + i, 1_000_000 + i))
    cds._sweep(where)
    assert sorted(p.name for p in where.glob("*.jsa")) == sorted(f"k{i}.jsa" for i in range(2, cds.KEEP + 2))
