"""Test helpers: a throw-away lake project with a CDC directory, and readers of its tables."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

from framework.errors import ConfigError
from framework.project.config import Project, load_project
from framework.runtime.paths import Layout


def ods_config_issues(tmp_path: Path, tables: str, lake: str = "name: demo\n") -> list[Any]:
    """The issues of a project with one table YAML (empty when it loads)."""
    (tmp_path / "lake.yaml").write_text(lake)
    (tmp_path / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (tmp_path / "layers" / "ods" / "t.yaml").write_text(textwrap.dedent(tables))
    try:
        load_project(tmp_path)
    except ConfigError as e:
        return e.issues
    return []


def small_project(root: Path, files: dict[str, str]) -> Path:
    """A project at `root` (lake.yaml on local[1]) with `files` under layers/ ({"dws/x.sql": "..."})."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "lake.yaml").write_text("name: t\nwarehouse: wh\nspark: {master: 'local[1]'}\n")
    for rel, text in files.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def fixture_lines(path: Path) -> list[str]:
    """Message lines of a fixture file; Paimon files open with a license comment, skipped as
    ../shared/fixtures/README.md says ("skip lines that are not JSON")."""
    out = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if not s or s.startswith(("/*", "*", "*/", "#")):
            continue
        out.append(s)
    return out


class LakeProject:
    """A project directory with lake.yaml, layers/ods/tables.yaml and a cdc/ directory."""

    def __init__(self, root: Path, tables_yaml: str, lake_extra: str = "") -> None:
        self.root = root
        (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
        (root / "cdc").mkdir(exist_ok=True)
        # Tests exercise the incremental strategies themselves: no size-based recompute unless a
        # test asks for it (`build:` in lake_extra).
        build = "" if "build:" in lake_extra else "build: {recompute_below_mib: 0}\n"
        (root / "lake.yaml").write_text(
            "name: t\nwarehouse: warehouse\nspark: {master: 'local[2]'}\n" + build + textwrap.dedent(lake_extra)
        )
        (root / "layers" / "ods" / "tables.yaml").write_text(textwrap.dedent(tables_yaml))
        self._n = 0

    @property
    def project(self) -> Project:
        return load_project(self.root)

    @property
    def layout(self) -> Layout:
        return Layout(self.project.warehouse)

    def add_models(self, models: dict[str, str]) -> LakeProject:
        """Write model files, e.g. {"dws/agg.sql": "select ...", "dws/agg.yaml": "key: [id]"}."""
        for rel, text in models.items():
            p = self.root / "layers" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return self

    def write_cdc(self, lines: list[str] | list[dict[str, Any]], name: str | None = None) -> Path:
        """Write one CDC file; mtimes increase with each file so arrival order is the write order."""
        self._n += 1
        path = self.root / "cdc" / (name or f"{self._n:04d}.json")
        text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
        path.write_text(text)
        t = 1_700_000_000 + self._n * 10
        os.utime(path, (t, t))
        return path

    def ingest(self, spark: Any, **kw: Any) -> Any:
        from framework.ods.ingest import run_ingest

        return run_ingest(spark, self.project, **kw)

    def raw(self, spark: Any, table: str) -> Any:
        from framework.table import hudi

        return hudi.read(spark, self.layout.table(f"ods.{table}"))

    def rows(self, spark: Any, table: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        """Live rows (soft deletes filtered), data columns only, sorted."""
        df = self.raw(spark, table).where("NOT _deleted")
        cols = columns or [c for c in df.columns if not c.startswith("_")]
        out = [r.asDict() for r in df.select(*cols).collect()]
        return sorted(out, key=lambda r: tuple(str(r[c]) for c in cols))

    def dead_letters(self, spark: Any) -> list[dict[str, Any]]:
        from framework.table import hudi

        path = self.layout.dead_letter
        if not hudi.table_exists(path):
            return []
        return sorted((r.asDict() for r in hudi.read(spark, path).select("loc", "reason", "source_table", "raw").collect()), key=lambda r: r["loc"])


def envelope(op: str, table: str, before: dict | None, after: dict | None, *, pos: int, row: int = 0, ts: int = 1_700_000_000_000, file: str = "mysql-bin.000001") -> dict[str, Any]:
    """A bare Debezium MySQL envelope (no schema block)."""
    db, tbl = table.split(".")
    return {
        "before": before,
        "after": after,
        "source": {"version": "2.5.0.Final", "connector": "mysql", "name": "t", "ts_ms": ts, "snapshot": "false", "db": db, "table": tbl, "file": file, "pos": pos, "row": row},
        "op": op,
        "ts_ms": ts + 5,
    }


class UsersSource:
    """`shop.users` (id -> city, score) as the source database holds them, and the CDC events that
    put them there; tests subclass it with their own oracle."""

    def __init__(self) -> None:
        self.users: dict[int, tuple[str, int]] = {}
        self.pos = 0

    def put(self, uid: int, city: str, score: int) -> dict[str, Any]:
        self.pos += 1
        before = self.users.get(uid)
        self.users[uid] = (city, score)
        b = None if before is None else {"id": uid, "city": before[0], "score": before[1]}
        return envelope("c" if before is None else "u", "shop.users", b, {"id": uid, "city": city, "score": score}, pos=self.pos)

    def delete(self, uid: int) -> dict[str, Any]:
        self.pos += 1
        city, score = self.users.pop(uid)
        return envelope("d", "shop.users", {"id": uid, "city": city, "score": score}, None, pos=self.pos)
