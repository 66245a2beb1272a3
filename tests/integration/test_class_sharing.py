"""Class data sharing with a real JVM (framework/runtime/cds.py): the first `lake` run starts the
warm-up that writes the archive, the next runs map it, and neither a used nor a broken archive
puts anything on stdout or fails a run (`--format json` must stay parseable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def _sql(root: Path, cds_dir: Path) -> None:
    env = {**os.environ, "LAKE_CDS_DIR": str(cds_dir)}
    env.pop("LAKE_CDS", None)
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), "sql", "SELECT 1 AS x", "--format", "json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == [{"x": 1}], r.stdout


def test_the_first_run_warms_an_archive_up_the_next_map_it_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "layers").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: cds\nwarehouse: wh\n")
    where = tmp_path / "cds"
    _sql(root, where)
    deadline = time.monotonic() + 240
    while list(where.glob("*.lock")) and time.monotonic() < deadline:  # the detached warm-up
        time.sleep(1)
    logs = "\n".join(p.read_text() for p in where.glob("*.log"))
    (archive,) = list(where.glob("*.jsa")) or [None]
    assert archive is not None, logs
    assert archive.stat().st_size > 10_000_000  # Spark's and Hudi's classes
    assert not list(where.glob("*.tmp")) and not list(where.glob("*.lock"))
    os.utime(archive, (1_000_000, 1_000_000))
    _sql(root, where)
    assert archive.stat().st_mtime > 1_000_000  # mapped (and marked as used)
    archive.chmod(0o644)
    archive.write_bytes(b"not an archive" * 1000)  # e.g. a disk that filled up mid-copy
    _sql(root, where)
    assert not list(where.glob("*.lock"))  # an archive exists (broken or not): no second warm-up
