"""The whole flow with the warehouse and the CDC files in an S3 bucket (a real S3-compatible
server, moto, on loopback): ingest, build --incremental, sql, check, runs and report, each a new
`lake` process as a user runs them. The oracle is the final source state computed here from the
events, and the models' SQL evaluated over it in plain Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import envelope
from tests.s3_fixture import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.s3]

TABLES = """\
tables:
  - source: shop.users
    key: [id]
    checks:
      - not_null: [id]
  - {source: shop.orders, key: [id]}
"""
MODELS = {
    "dwd/order_user.sql": "select o.id, o.user_id, o.amount, u.city from ods.orders o join ods.users u on o.user_id = u.id",
    "dwd/order_user.yaml": "key: [id]\n",
    "dws/city_sales.sql": ("select city, count(*) as n, sum(amount) as total, min(amount) as lo, max(amount) as hi "
                           "from dwd.order_user group by city"),
    "dws/city_sales.yaml": "key: [city]\nchecks:\n  - not_null: [city]\n",
}


def _user(op: str, i: int, city: str | None, pos: int, old: str | None = None) -> dict[str, Any]:
    before = {"id": i, "city": old} if op in ("u", "d") else None
    return envelope(op, "shop.users", before, None if op == "d" else {"id": i, "city": city}, pos=pos)


def _order(op: str, i: int, user: int, amount: int, pos: int) -> dict[str, Any]:
    row = {"id": i, "user_id": user, "amount": amount}
    return envelope(op, "shop.orders", row if op in ("u", "d") else None, None if op == "d" else row, pos=pos)


ROUND_1 = [_user("c", 1, "bj", 1), _user("c", 2, "sh", 2), _user("c", 3, "bj", 3), _user("c", 4, "gz", 4),
           *(_order("c", 10 + i, 1 + i % 4, 5 * i + 1, 10 + i) for i in range(8)),
           _user("u", 2, "bj", 30, "sh"), _user("d", 4, None, 31, "gz")]
ROUND_2 = [_order("u", 11, 2, 99, 40), _order("d", 12, 3, 11, 41), _user("c", 4, "sz", 42), _user("d", 3, None, 43, "bj"),
           _order("c", 30, 4, 7, 44), _user("c", 3, "bj", 20)]  # the last: a replay older than the delete


def _final(events: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """Source state after the events, applied in binlog position order (the oracle)."""
    state: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for e in sorted(events, key=lambda e: e["source"]["pos"]):
        t = e["source"]["table"]
        if e["op"] == "d":
            state[t].pop(e["before"]["id"], None)
        else:
            state[t][e["after"]["id"]] = e["after"]
    return state


# One `lake sql` (one JVM) for every table: each as a JSON array in its own column.
QUERIES = {"users": "select to_json(collect_list(struct(id, city))) from ods.users",
           "orders": "select to_json(collect_list(struct(id, user_id, amount))) from ods.orders",
           "joined": "select to_json(collect_list(struct(id, user_id, amount, city))) from dwd.order_user",
           "sales": "select to_json(collect_list(struct(city, n, total, lo, hi))) from dws.city_sales"}
QUERY = "select " + ", ".join(f"({q}) as {name}" for name, q in QUERIES.items())


def expected() -> dict[str, list[dict[str, Any]]]:
    """Every table as QUERY returns it, from the source's final state and the models' SQL done in Python."""
    src = _final(ROUND_1 + ROUND_2)
    users, orders = src["users"], src["orders"]

    def ordered(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        return sorted(rows, key=lambda r: str(r[key]))

    joined = [{"id": o["id"], "user_id": o["user_id"], "amount": o["amount"], "city": users[o["user_id"]]["city"]}
              for o in orders.values() if o["user_id"] in users]
    by_city: dict[str, list[int]] = defaultdict(list)
    for r in joined:
        by_city[r["city"]].append(r["amount"])
    sales = [{"city": c, "n": len(a), "total": sum(a), "lo": min(a), "hi": max(a)} for c, a in by_city.items()]
    return {"users": ordered(list(users.values()), "id"), "orders": ordered(list(orders.values()), "id"),
            "joined": ordered(joined, "id"), "sales": ordered(sales, "city")}


def _lake(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, f"lake {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


def _upload(s3: S3Server, bucket: str, key: str, events: list[dict[str, Any]]) -> None:
    s3.client().put_object(Bucket=bucket, Key=key, Body=("\n".join(json.dumps(e) for e in events) + "\n").encode())


# make test's budget: this one runs every command against a bucket from a local driver (~10
# minutes of a worker), `lake verify` and its repair included. Nightly (LAKE_NIGHTLY=1), as are the
# rewrite below and test_spark_cluster.py; make test keeps S3 through test_s3_lock.py's leases.
@pytest.mark.nightly
@pytest.mark.skipif(not os.environ.get("LAKE_NIGHTLY"), reason="nightly: set LAKE_NIGHTLY=1")
def test_ingest_build_query_check_and_report_with_everything_in_a_bucket(tmp_path: Path, s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    conf = {**s3_server.spark_conf(), "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    (tmp_path / "lake.yaml").write_text(textwrap.dedent(f"""\
        name: s3flow
        warehouse: s3a://{bucket}/wh
        spark: {{master: 'local[2]', conf: {json.dumps(conf)}}}
        ods: {{source: {{kind: files, path: 's3a://{bucket}/cdc'}}, freshness: {{error_after: 3650d}}}}
        build: {{recompute_below_mib: 0}}
        """))
    for rel, text in {"ods/tables.yaml": TABLES, **MODELS}.items():
        (tmp_path / "layers" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "layers" / rel).write_text(text)

    _upload(s3_server, bucket, "cdc/0001.json", ROUND_1)
    _lake(tmp_path, "run")  # ingest, then build what the new data makes stale
    _upload(s3_server, bucket, "cdc/0002.json", ROUND_2)
    _lake(tmp_path, "ingest", "--once")
    out = _lake(tmp_path, "build", "--incremental").stdout
    assert "incremental" in out, out  # the second build read the change, not the whole upstream

    (row,) = json.loads(_lake(tmp_path, "sql", QUERY, "--format", "json").stdout)
    got = {name: sorted(json.loads(v), key=lambda r: str(r.get("id", r.get("city")))) for name, v in row.items()}
    assert got == expected()

    _lake(tmp_path, "check")
    runs = json.loads(_lake(tmp_path, "runs", "--format", "json").stdout)
    assert [r["command"] for r in runs] == ["run", "ingest", "build", "check"]
    assert {r["status"] for r in runs} == {"ok"}
    # Commits read from the bucket's timelines without Spark's readers (framework/table/timeline.py,
    # through Hadoop's file system): upstream changes, freshness, state:.
    assert any(m["upstream_changed"] for m in runs[2]["models"]) and set(runs[0]["sources"]) == set(runs[3]["sources"]) != set()
    fresh = json.loads(_lake(tmp_path, "freshness", "--json").stdout)
    assert {(f["status"], f["measured_from"]) for f in fresh} == {("ok", "source.ts_ms")}
    assert json.loads(_lake(tmp_path, "dag", "state:modified", "--format", "json").stdout)["nodes"] == []
    page = Path(_lake(tmp_path, "report", "--open").stdout.strip())
    assert page.is_file() and page.is_relative_to(tmp_path / "out")

    # Everything lake keeps lives in the bucket; nothing became a local folder named after the URI.
    keys = s3_server.keys(bucket, "wh/")
    for prefix in ("wh/ods/users/.hoodie/", "wh/dws/city_sales/.hoodie/", "wh/_lake/runs/", "wh/_lake/quality/", "wh/_lake/checkpoints/ods/"):
        assert any(k.startswith(prefix) for k in keys), prefix
    assert not any(k.startswith("wh/_lake/locks/") for k in keys)  # every lease released
    assert not (tmp_path / "s3a:").exists() and not (tmp_path / "warehouse").exists()

    # lake verify on S3 (issue 44): every model equals a full build as of its checkpoint (time
    # travel on the bucket's tables); a value a foreign writer changed in a base file in the
    # bucket is found, repaired through the build path, and verifies equal afterwards.
    assert {v["model"]: v["status"] for v in _verified(tmp_path)[1]} == {"dwd.order_user": "equal", "dws.city_sales": "equal"}
    _change_in_base_file(s3_server, bucket, "wh/dws/city_sales/", "city", "bj", "total", 1000)
    code, (v,) = _verified(tmp_path, "dws.city_sales")
    assert (code, v["status"], v["changed"], v["columns"], v["samples"][0]["key"]) == (1, "differs", 1, {"total": 1}, {"city": "bj"}), v
    code, (v,) = _verified(tmp_path, "dws.city_sales", "--repair")
    assert (code, v["repaired"]) == (1, True), v  # it differed (exit 1) and was rebuilt
    code, out = _verified(tmp_path)
    assert code == 0 and {v["status"] for v in out} == {"equal"}, out


def _verified(root: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """`lake verify ARGS --json` in a new process: its exit code and per-model results."""
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), "verify", *args, "--json"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert r.returncode in (0, 1) and "Traceback" not in r.stdout + r.stderr, f"lake verify {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r.returncode, json.loads(r.stdout)


def _change_in_base_file(s3: S3Server, bucket: str, table: str, key_column: str, key: Any, column: str, add: int) -> None:
    """Add `add` to `column` of the row whose `key_column` is `key`, in the newest base file of
    `table` that holds it, rewritten in place in the bucket (a writer outside lake and Hudi)."""
    import io

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    client = s3.client()
    files = sorted((k for k in s3.keys(bucket, table) if k.endswith(".parquet") and "/.hoodie/" not in k),
                   key=lambda k: k.rsplit("_", 1)[-1], reverse=True)  # <file id>_<token>_<instant>.parquet: newest first
    for name in files:
        t = pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=name)["Body"].read()))
        hit = pc.equal(t[key_column], key)
        if pc.any(hit).as_py():
            i = t.schema.get_field_index(column)
            t = t.set_column(i, t.schema.field(i), pc.if_else(hit, pc.add(t[column], add), t[column]))
            buf = io.BytesIO()
            pq.write_table(t, buf)
            client.put_object(Bucket=bucket, Key=name, Body=buf.getvalue())
            return
    raise AssertionError(f"no base file of {table} holds {key_column}={key}")


def test_a_rewrite_killed_while_it_swaps_on_s3_loses_nothing(tmp_path: Path, s3_server: S3Server) -> None:
    """Issue 27 item 5: on S3 a rename is a copy then a delete, so the widening rewrite's swap
    (framework/ods/rewrite.py) copies the staged table into place file by file, against the
    manifest its marker carries, and deletes the staged copy only once the table is complete.
    Killed in the middle of the copy, then after it (the staged copy then half deleted, as an
    interrupted S3 delete leaves it), the next ingests finish the swap: the table holds the
    source's final rows in the new types."""
    from datetime import date, datetime
    from decimal import Decimal

    from tests.typed_cdc import DATE, DATETIME3, STRING, TypedTable, decimal

    bucket = s3_server.new_bucket()
    conf = {**s3_server.spark_conf(), "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    (tmp_path / "lake.yaml").write_text(textwrap.dedent(f"""\
        name: s3rewrite
        warehouse: s3a://{bucket}/wh
        spark: {{master: 'local[2]', conf: {json.dumps(conf)}}}
        ods: {{source: {{kind: files, path: 's3a://{bucket}/cdc'}}}}
        locks: {{lease_seconds: 10}}
        """))  # a killed run's lease expires within the next run's lock timeout
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "tables.yaml").write_text("tables:\n  - {source: shop.c, key: [code]}\n")
    c = TypedTable("shop.c", "code", {"code": decimal(6, 2), "grp": STRING, "day": DATE})
    first = [c.upsert({"code": Decimal(f"{i}.50"), "grp": "xy"[i % 2], "day": date(2024, 1, i)}) for i in range(1, 7)]
    s3_server.client().put_object(Bucket=bucket, Key="cdc/0001.json", Body=("\n".join(first) + "\n").encode())
    _lake(tmp_path, "ingest", "--once")
    c.alter("code", decimal(8, 4))
    c.alter("day", DATETIME3, lambda d: datetime(d.year, d.month, d.day))
    second = [c.upsert({"code": Decimal("9.1234"), "grp": "y", "day": datetime(2024, 5, 6, 7, 8, 9)}), c.delete(Decimal("2.50"))]
    s3_server.client().put_object(Bucket=bucket, Key="cdc/0002.json", Body=("\n".join(second) + "\n").encode())

    def killed(failpoint: str) -> dict[str, Any]:
        r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "ingest", "--once"], capture_output=True,
                           text=True, env={**os.environ, "LAKE_FAILPOINT": failpoint}, timeout=600)
        assert r.returncode == -9, f"{failpoint}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        marker = s3_server.client().get_object(Bucket=bucket, Key="wh/_lake/staging/ods_c.json")["Body"].read()
        return dict(json.loads(marker))

    mid = killed("rewrite_copy:3")  # three files copied into the emptied table folder
    assert mid["phase"] == "cleared" and len(mid["files"]) > 3
    table = [k for k in s3_server.keys(bucket, "wh/ods/c/") if not k.endswith("/")]
    assert 0 < len(table) < len(mid["files"])  # the table folder is partial, the staged copy whole
    done = killed("after_rewrite_copied")
    assert done["phase"] == "copied"
    staged = [k for k in s3_server.keys(bucket, "wh/_lake/staging/ods_c/") if not k.endswith("/")]
    assert len(staged) == len(done["files"])
    for key in staged[: len(staged) // 2]:  # a delete of the staged copy interrupted half way
        s3_server.client().delete_object(Bucket=bucket, Key=key)
    _lake(tmp_path, "ingest", "--once")
    assert [k for k in s3_server.keys(bucket, "wh/_lake/staging/") if not k.endswith("/")] == []  # (S3A may keep folder markers)
    (row,) = json.loads(_lake(tmp_path, "sql", "select to_json(collect_list(struct(cast(code as string) as code, grp, "
                              "date_format(day, 'yyyy-MM-dd HH:mm:ss') as day))) as t from ods.c", "--format", "json").stdout)

    def text(v: Any) -> str:
        return v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else str(v)

    want = sorted((str(Decimal(r["code"]).quantize(Decimal("0.0001"))), r["grp"], text(r["day"])) for r in c.live())
    assert sorted((r["code"], r["grp"], r["day"]) for r in json.loads(row["t"])) == want
