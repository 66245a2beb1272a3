"""The day of an analytics engineer, through the `lake` command in fresh processes, on ONE project
(Spark starts are the cost: each step that needs it starts one): ingest with its progress on a
terminal, a bootstrap load, the DAG and dbt's selection grammar, a build with its progress, a
plan, `state:modified`, source freshness (`lake freshness`, `lake check`, `lake run`) and the rows
read and changed upstream in `lake runs`. The tests run in file order and build on each other.

Oracles are the CDC and dump written here (what each table must hold, when each event happened),
never lake's own computation."""

from __future__ import annotations

import json
import os
import pty
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import LakeProject, envelope

pytestmark = pytest.mark.slow

ODS = """
tables:
  - {source: shop.t, key: [id]}
  - {source: shop.b, key: [id], freshness: null}
  - {source: shop.old, key: [id], freshness: {error_after: 2h}}
"""
LAKE = "ods:\n  freshness: {warn_after: 30m, error_after: 2h}\n"
MODELS = {
    "dwd/t_rows.sql": "select id, k from ods.t",
    "dws/by_k.sql": "select k, count(*) as n from ods.t group by k",
    "dws/by_k.yaml": "tags: [finance]\n",
    "dws/b_names.sql": "select id, name from ods.b",
}
HOUR_MS = 3_600_000
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def lake(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=600)


def lake_tty(root: Path, *args: str) -> tuple[int, str]:
    """`lake ARGS` on a pseudo-terminal (what a user sees: rich draws its live progress there
    only); the exit code and the output without terminal control sequences."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), *args], stdin=slave, stdout=slave,
                            stderr=slave, env={**env, "TERM": "xterm-256color"}, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=600), ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> LakeProject:
    lp = LakeProject(tmp_path_factory.mktemp("workflow"), ODS, LAKE).add_models(MODELS)
    hour_ago = int(time.time() * 1000) - HOUR_MS
    lp.write_cdc([envelope("c", "shop.t", None, {"id": i, "k": k}, pos=i, ts=hour_ago + i) for i, k in ((1, "a"), (2, "a"), (3, "b"))]
                 + [envelope("c", "shop.old", None, {"id": 1}, pos=9, ts=hour_ago - 2 * HOUR_MS)])
    (lp.root / "b.csv").write_text("id,name\n1,x\n2,y\n")
    return lp


def test_ingest_shows_its_progress_on_a_terminal(project: LakeProject) -> None:
    code, out = lake_tty(project.root, "ingest", "--once")
    assert code == 0, out
    assert "ingesting: waiting for the first micro-batch" in out  # the live status line
    assert re.search(r"batch 0: 4 events in [\d.]+s → .*ods\.t \+3/-0", out), out
    assert re.search(r"ods\.old\s.*\b1\b", out) and "Traceback" not in out


def test_bootstrap_loads_a_dump(project: LakeProject) -> None:
    r = lake(project.root, "ingest", "--bootstrap", "ods.b")
    assert r.returncode == 1 and "--bootstrap needs --path DUMP" in r.stderr and "fix:" in r.stderr
    out = ok(lake(project.root, "ingest", "--bootstrap", "ods.b", "--path", str(project.root / "b.csv"), "--position", "mysql-bin.000003:154"))
    assert f"bootstrapped ods.b: 2 rows from {project.root / 'b.csv'} (hand-off position mysql:" in out


def test_dag_and_the_selection_grammar_without_spark(project: LakeProject) -> None:
    tree = ok(lake(project.root, "dag"))
    assert "dws.by_k  [sql]\n  └── ods.t" in tree and "dws.b_names  [sql]\n  └── ods.b" in tree
    assert "ods_t[(ods.t)]" in ok(lake(project.root, "dag", "--format", "mermaid"))
    assert '"ods.t" -> "dws.by_k";' in ok(lake(project.root, "dag", "--format", "dot"))
    graph = json.loads(ok(lake(project.root, "dag", "tag:finance,layer:dws", "--format", "json")))
    assert {n["name"] for n in graph["nodes"]} == {"ods.t", "dws.by_k"} and graph["edges"] == [["ods.t", "dws.by_k"]]
    graph = json.loads(ok(lake(project.root, "dag", "path:layers/dws ods.t+1,layer:dwd", "--format", "json")))
    assert {n["name"] for n in graph["nodes"]} == {"ods.t", "ods.b", "dws.by_k", "dws.b_names", "dwd.t_rows"}
    graph = json.loads(ok(lake(project.root, "dag", "state:new", "--format", "json")))  # no model table yet
    assert {n["name"] for n in graph["nodes"] if not n["name"].startswith("ods.")} == {"dwd.t_rows", "dws.by_k", "dws.b_names"}
    r = lake(project.root, "build", "dwd.t_rows,dws.by_k")  # the old union: an error before Spark, pointing to the change
    assert r.returncode == 1 and "a comma means intersection" in r.stderr and "lake build dwd.t_rows dws.by_k" in r.stderr
    assert "Traceback" not in r.stderr


def test_build_shows_its_progress_on_a_terminal(project: LakeProject) -> None:
    code, out = lake_tty(project.root, "build")
    assert code == 0, out
    assert re.search(r"building dw[ds]\.\w+", out) and re.search(r"\b[0-2]/3\b", out), out  # the live bar: model, done/total
    for line in ("dwd.t_rows: full (rowwise) 3 written", "dws.by_k: full (aggregate) 2 written", "dws.b_names: full (rowwise) 2 written"):
        assert line in out, out
    assert "build: 3 model(s)" in out


def test_plan_then_state_modified(project: LakeProject) -> None:
    hour_ago = int(time.time() * 1000) - HOUR_MS
    project.write_cdc([envelope("u", "shop.t", {"id": 1, "k": "a"}, {"id": 1, "k": "b"}, pos=20, ts=hour_ago),
                       envelope("d", "shop.t", {"id": 2, "k": "a"}, None, pos=21, ts=hour_ago),
                       envelope("c", "shop.t", None, {"id": 4, "k": "c"}, pos=22, ts=hour_ago)])
    ok(lake(project.root, "ingest", "--once"))
    out = ok(lake(project.root, "plan", "--incremental", "+tag:finance"))
    assert re.search(r"dws\.by_k\s+│\s+incremental\s+│\s+aggregate\s+│\s+ods\.t: 1\s+│\s+ods\.t: 3", out), out
    # A comment in one model, a description in another: neither is a data change, only the
    # description is metadata that `state:modified` sees (the tables' last commits, no Spark).
    (project.root / "layers" / "dwd" / "t_rows.sql").write_text("-- every row\nSELECT id, k FROM ods.t\n")
    (project.root / "layers" / "dws" / "by_k.yaml").write_text("tags: [finance]\ndescription: rows per k\n")
    graph = json.loads(ok(lake(project.root, "dag", "state:modified", "--format", "json")))
    assert [n["name"] for n in graph["nodes"] if n["name"].startswith("dw")] == ["dws.by_k"]
    built = json.loads(ok(lake(project.root, "build", "state:modified", "--incremental", "--json")))
    assert [(b["model"], b["mode"]) for b in built] == [("dws.by_k", "incremental")]
    # Its upstream changed by 1 update, 1 delete and 1 insert; an incremental build reads those.
    assert built[0]["upstream_changed"] == {"ods.t": 3} and built[0]["rows_read"] == 3
    graph = json.loads(ok(lake(project.root, "dag", "state:modified", "--format", "json")))
    assert graph["nodes"] == []  # the build's commit records the new metadata
    # Nothing new upstream of dws.by_k since: its incremental build is a noop told from the
    # timeline files, without a JVM (there is no Java to start one with).
    no_java = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": str(project.root / "no-java")}
    again = json.loads(ok(lake(project.root, "build", "dws.by_k", "--incremental", "--json", env=no_java)))
    assert [(b["model"], b["mode"], b["rows_read"]) for b in again] == [("dws.by_k", "noop", 0)]
    r = lake(project.root, "build", "dwd.t_rows", "--incremental", env=no_java)  # ods.t has a commit it has not read: Spark
    assert r.returncode == 1 and "no Java runtime found" in r.stderr, r.stdout + r.stderr


def test_freshness_and_check(project: LakeProject) -> None:
    r = lake(project.root, "freshness", "--json")
    assert r.returncode == 1, r.stdout + r.stderr  # ods.old is past its error_after
    by = {f["table"]: f for f in json.loads(r.stdout)}
    t, b, old = by["ods.t"], by["ods.b"], by["ods.old"]
    assert (t["status"], t["measured_from"]) == ("warn", "source.ts_ms") and 3500 < t["age_s"] < 3600 + 600
    assert (old["status"], old["measured_from"], old["error_after_s"], old["warn_after_s"]) == ("error", "source.ts_ms", 7200, None)
    assert (b["status"], b["measured_from"]) == ("none", "last commit") and b["age_s"] < 600  # a bootstrap: no source time
    out = ok(lake(project.root, "freshness", "ods.t"))
    # An hour and a bit: "1h 2m", or "1h 40s" within its first minute (a zero unit is not shown).
    assert re.search(r"ods\.t\s+│\s+warn\s+│\s+1h( \d+[ms])?\s+│\s+source\.ts_ms", out), out
    r = lake(project.root, "check", "--format", "json")  # no checks declared: freshness only, no Spark
    assert r.returncode == 1 and [f["status"] for f in json.loads(r.stdout)["freshness"]] == ["warn", "error"]
    out = ok(lake(project.root, "check", "ods.t ods.b"))
    assert "source freshness" in out and "warn" in out


def test_run_records_freshness_rows_read_and_upstream_changes(project: LakeProject) -> None:
    project.write_cdc([envelope("c", "shop.t", None, {"id": 5, "k": "c"}, pos=30, ts=int(time.time() * 1000))])
    cycle = json.loads(ok(lake(project.root, "run", "--json")))
    assert {k: v["status"] for k, v in cycle["sources"].items()} == {"ods.t": "ok", "ods.old": "error"}
    models = {m["model"]: m for m in cycle["models"]}
    # t_rows last built before the second ingest: it consumed both (3 + 1 rows); by_k the new one.
    assert models["dwd.t_rows"]["upstream_changed"] == {"ods.t": 4} and models["dws.by_k"]["upstream_changed"] == {"ods.t": 1}
    runs = json.loads(ok(lake(project.root, "runs", "--format", "json")))
    full = next(r for r in runs if r["command"] == "build" and r["models"][0]["mode"] == "full")
    assert {m["model"]: m["rows_read"] for m in full["models"]} == {"dwd.t_rows": 3, "dws.by_k": 3, "dws.b_names": 2}
    assert all(m["upstream_changed"] == {} for m in full["models"])  # a first build has no checkpoint
    text = ok(lake(project.root, "runs"))
    assert "read 8 rows" in text and "read 3 rows (upstream changed 3)" in text
    # What the CDC and the dump leave: t = {1: b, 3: b, 4: c, 5: c} (2 deleted), b = {1: x, 2: y}.
    rows = json.loads(ok(lake(project.root, "sql", "select 't' as m, cast(id as int) as i, k as v from dwd.t_rows "
                                  "union all select 'k', cast(n as int), k from dws.by_k "
                                  "union all select 'b', cast(id as int), name from dws.b_names", "--format", "json")))
    assert sorted((r["m"], r["i"], r["v"]) for r in rows) == [
        ("b", 1, "x"), ("b", 2, "y"), ("k", 2, "b"), ("k", 2, "c"), ("t", 1, "b"), ("t", 3, "b"), ("t", 4, "c"), ("t", 5, "c")]


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    """`lake demo` on a copy of this repository's project: two rounds ingested and built, and every
    ODS table equal to the simulated source (the demo's own comparison, printed)."""
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "lake.yaml").write_text((repo / "lake.yaml").read_text())
    subprocess.run(["cp", "-r", str(repo / "layers"), str(tmp_path / "layers")], check=True)
    out = ok(lake(tmp_path, "demo", "--events", "40", "--seed", "3"))
    assert "ODS vs source (simulated MySQL)" in out and "round 2: ALTER TABLE user ADD COLUMN age int" in out
    verdicts = re.findall(r"→ ods\.\w+\s+│\s+\d+\s+│\s+\d+\s+│\s+(\w+)", out)
    assert len(verdicts) == 6 and set(verdicts) == {"yes"}, out
    assert "dws.user_agg: incremental (aggregate)" in out
    assert (tmp_path / "out" / "demo" / "warehouse" / "ods").is_dir() and not (tmp_path / "warehouse").exists()
