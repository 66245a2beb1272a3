"""`lake demo` pointed at a real project: it refuses without the seed tables, runs in its own
folder (out/demo), deletes only what it created (the `.lake-demo` marker) and names each removal.
No Spark: everything here happens before the demo's first Spark session."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from framework.demo.project import MARKER, prepared
from framework.demo.run import run_demo
from framework.errors import LakeError
from framework.project.config import load_project
from framework.runtime.lock import hold, table_lock
from framework.runtime.paths import Layout

REPO = Path(__file__).resolve().parents[2]


def _user_project(root: Path, seed_tables: bool) -> dict[Path, str]:
    """A project with its own warehouse and CDC data (the files returned, with their contents)."""
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: mine\nwarehouse: warehouse\nods: {source: {kind: files, path: cdc}}\n")
    if seed_tables:
        for name in ("test_db.yaml", "salesdb.yaml"):
            shutil.copyfile(REPO / "layers" / "ods" / name, root / "layers" / "ods" / name)
        shutil.copytree(REPO / "layers" / "dws", root / "layers" / "dws")
        shutil.copytree(REPO / "layers" / "dwd", root / "layers" / "dwd")
    (root / "layers" / "ods" / "mine.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    files = {
        root / "warehouse" / "ods" / "orders" / "data.parquet": "the user's table",
        root / "warehouse" / "_lake" / "runs" / "r1.json": "{}",
        root / "cdc" / "0001-orders.json": '{"op": "c"}',
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def _intact(files: dict[Path, str]) -> None:
    for path, text in files.items():
        assert path.read_text() == text, f"{path} was touched"


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=1000, color_system=None), out


def test_cli_refuses_a_project_without_the_seed_tables_and_deletes_nothing(tmp_path: Path) -> None:
    files = _user_project(tmp_path, seed_tables=False)
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "demo"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "test_db.user" in r.stderr and "does not declare" in r.stderr and "Traceback" not in r.stderr
    _intact(files)
    assert not (tmp_path / "out").exists()  # nothing written either


def test_demo_runs_in_its_own_folder_and_fresh_removes_only_what_it_created(tmp_path: Path) -> None:
    files = _user_project(tmp_path, seed_tables=True)
    project = load_project(tmp_path)
    console, out = _console()
    with prepared(project, console, fresh=True, lock_timeout=0) as demo:
        assert demo.root == tmp_path / "out" / "demo"
        assert demo.warehouse.local == demo.root / "warehouse"
        # The seed declarations and the models built from them only; not the user's own table.
        assert {t.source for t in demo.ods_tables} == {"test_db.user", "test_db.product", "test_db.user_order", "salesdb.CUSTOMER",
                                                        "salesdb.CUSTOMER_SITE", "salesdb.SALES_ORDER_ALL"}
        assert (demo.root / "layers" / "dws" / "user_agg.sql").is_file() and not (demo.root / "layers" / "ods" / "mine.yaml").exists()
        # Its tables are locked while it runs (a concurrent writer waits or fails).
        with pytest.raises(LakeError, match="lock"), hold(Layout(demo.warehouse).locks, [table_lock("ods.user")], command="t", timeout=0):
            pass
    _intact(files)
    for d in ("", "layers", "cdc", "warehouse"):
        assert (tmp_path / "out" / "demo" / d / MARKER).is_file()
    assert "removed" not in out.getvalue()  # a first run has nothing to remove

    # What an earlier demo left, plus a user's file dropped into the demo folder itself.
    demo_root = tmp_path / "out" / "demo"
    left = [demo_root / "cdc" / "0001-snapshot.json", demo_root / "warehouse" / "ods" / "user" / "f.parquet",
            demo_root / "warehouse" / "_lake" / "runs" / "r.json"]
    for p in left:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("demo")
    notes = demo_root / "notes.txt"
    notes.write_text("mine")
    console, out = _console()
    with prepared(project, console, fresh=True, lock_timeout=0):
        pass
    removed = sorted(line.removeprefix("removed ") for line in out.getvalue().splitlines() if line.startswith("removed "))
    assert removed == sorted([f"{demo_root / 'layers'}/", f"{demo_root / 'cdc' / '0001-snapshot.json'}",
                              f"{demo_root / 'warehouse' / 'ods'}/", f"{demo_root / 'warehouse' / '_lake' / 'runs'}/"])
    assert not any(p.exists() for p in left)
    assert (demo_root / "warehouse" / "_lake" / "locks").is_dir()  # the lock files it held stay
    assert notes.read_text() == "mine"
    _intact(files)

    # --keep removes nothing.
    left[0].write_text("demo")
    console, out = _console()
    with prepared(project, console, fresh=False, lock_timeout=0):
        pass
    assert "removed" not in out.getvalue() and left[0].exists()


@pytest.mark.parametrize("foreign", ["out/demo", "out/demo/cdc", "out/demo/warehouse"])
def test_demo_refuses_folders_it_did_not_create(tmp_path: Path, foreign: str) -> None:
    files = _user_project(tmp_path, seed_tables=True)
    project = load_project(tmp_path)
    with prepared(project, _console()[0], fresh=True, lock_timeout=0):
        pass
    theirs = tmp_path / foreign
    (theirs / MARKER).unlink(missing_ok=True)
    if foreign == "out/demo":  # a folder of the user's where the demo would go
        shutil.rmtree(tmp_path / "out")
    (theirs / "keep.txt").parent.mkdir(parents=True, exist_ok=True)
    (theirs / "keep.txt").write_text("mine")
    earlier = tmp_path / "out" / "demo" / "warehouse" / "ods" / "user" / "f.parquet"
    if foreign != "out/demo":
        earlier.parent.mkdir(parents=True, exist_ok=True)
        earlier.write_text("demo")
    with pytest.raises(LakeError, match=re.escape(f"{theirs} exists and was not created by `lake demo`")), \
            prepared(project, _console()[0], fresh=True, lock_timeout=0):
        pass
    assert (theirs / "keep.txt").read_text() == "mine"
    if foreign != "out/demo":
        assert earlier.exists()  # refused before anything was deleted
    _intact(files)


def test_kafka_demo_refuses_a_folder_it_did_not_create_before_starting_anything(tmp_path: Path) -> None:
    _user_project(tmp_path, seed_tables=True)
    theirs = tmp_path / "out" / "kafka-demo" / "warehouse"
    theirs.mkdir(parents=True)
    (theirs / "keep.txt").write_text("mine")
    with pytest.raises(LakeError, match="was not created by `lake demo`"):
        run_demo(load_project(tmp_path), _console()[0], events=1, seed=1, fresh=True, kafka=True)
    assert (theirs / "keep.txt").read_text() == "mine" and not (tmp_path / "out" / "kafka-demo" / "broker").exists()
