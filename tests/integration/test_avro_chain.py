"""The real chain in Avro: MariaDB -> Debezium's MariaDB connector with Apicurio's Avro converter
(Confluent wire format, schemas registered in a real Apicurio Registry) -> Kafka -> lake
`format: debezium-avro` reading the writer schemas from the registry's Confluent-compatible API.

MariaDB is the oracle: after each `lake run` cycle every ODS table equals `SELECT *` of its source
table. The workload is the shop's (snapshot, inserts, updates, deletes, key changes, transactions,
NULLs, unicode, DECIMAL, DATETIME(3), TIMESTAMP(3)), an added column (a new schema id in the
registry) and a truncate, plus a table of the types whose Avro encoding differs from JSON's (DATE,
DATETIME(6), DECIMAL(20,4), DOUBLE, small and big integers, VARBINARY, BLOB, NULLs). lake subscribes
to every topic the connector writes (schema changes, the JSON schema history, transaction metadata,
heartbeats, tombstones). Then messages no converter wrote (a bad magic byte, a cut-off record, an
unknown schema id, a too short one) must land in the dead letter with their reasons, and a wrong
or unreachable registry must stop `lake ingest` with a clear error before anything commits.
"""

from __future__ import annotations

import json
import time
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from framework.demo.oracle import compare_all
from framework.demo.shop import Shop, oracle_views, project_files
from framework.errors import EnvironmentProblem
from framework.ods.ingest import run_ingest
from framework.ops.continuous import run_cycle
from framework.project.config import load_project
from framework.runtime.jars import AVRO_CONVERTER

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TYPES_DDL = """CREATE TABLE types (
  id INT PRIMARY KEY, d DATE NULL, dt6 DATETIME(6) NULL, amount DECIMAL(20,4) NULL, ratio DOUBLE NULL,
  small SMALLINT NULL, big BIGINT NULL, tiny TINYINT NULL, bin VARBINARY(16) NULL, blob_col BLOB NULL, txt TEXT NULL)"""
TYPES_ROWS = [
    (1, "2024-02-29", "2024-03-01 12:34:56.123456", Decimal("-12345678901234.5678"), 1.5, -32768, -9223372036854775808, -128,
     b"\x00\xff\x10", b"\x01\x02" * 40, "Zoë 李雷 🚀"),
    (2, "1970-01-01", "1999-12-31 23:59:59.999999", Decimal("0.0001"), -0.25, 32767, 9223372036854775807, 127, b"", b"", ""),
    (3, None, None, None, None, None, None, None, None, None, None),
    (4, "0999-01-01", "2100-01-01 00:00:00.000001", Decimal("99999999999999.9999"), 1e300, 0, 0, 0, b"\x80", b"\x7f", "x"),
]


def converters(registry_api: str) -> dict[str, str]:
    """Apicurio's AvroConverter for keys and values: auto-registered schemas, content ids in the
    Confluent framing (magic byte, 4-byte id) in the payload, not in record headers."""
    out = {}
    for side in ("key", "value"):
        out |= {
            f"{side}.converter": "io.apicurio.registry.utils.converter.AvroConverter",
            f"{side}.converter.apicurio.registry.url": registry_api,
            f"{side}.converter.apicurio.registry.auto-register": "true",
            f"{side}.converter.apicurio.registry.as-confluent": "true",
            f"{side}.converter.apicurio.registry.use-id": "contentId",
            f"{side}.converter.apicurio.registry.headers.enabled": "false",
        }
    return out | {"schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro"}


def _project(root: Path, database: str, servers: str, prefix: str, registry_url: str) -> Path:
    for rel, text in project_files(database, servers, prefix, models=False).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = yaml.safe_load((root / "lake.yaml").read_text())
    cfg["ods"]["source"] |= {"format": "debezium-avro", "schema_registry": {"url": registry_url}}
    (root / "lake.yaml").write_text(yaml.safe_dump(cfg))
    with open(root / "layers" / "ods" / "shop.yaml", "a", encoding="utf-8") as f:
        f.write(f"  - {{source: {database}.types, name: types, key: [id]}}\n")
    return root


def _dead(spark: Any, root: Path) -> dict[str, str]:
    from framework.runtime.paths import Layout
    from framework.table import hudi

    path = Layout(load_project(root).warehouse).dead_letter
    return {r["loc"]: r["reason"] for r in hudi.read(spark, path).collect()} if hudi.table_exists(path) else {}


def _round(spark: Any, root: Path, chain: Any, connect: Any, database: str, tables: list[str]) -> Any:
    connect.wait_caught_up()
    rec = run_cycle(spark, load_project(root), [], [], ["run"])
    assert rec.status == "ok", rec.error
    oracle_views(chain.db, database)
    comparisons = compare_all(spark, root / "warehouse", chain.db, database, tables, [])
    assert all(c.equal for c in comparisons), "\n".join(c.describe() for c in comparisons if not c.equal)
    assert all(c.expected > 0 for c in comparisons), [c.describe() for c in comparisons]
    return rec


def _one_avro_value(servers: str, topic: str) -> bytes:
    """A value the converter wrote (to cut short: a truncated record, not hand-made Avro)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": servers, "group.id": f"lake-test-{time.time_ns()}", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None and m.value():
                return bytes(m.value())
        raise AssertionError(f"no message in {topic}")
    finally:
        c.close()


def test_avro_chain_with_a_schema_registry(tmp_path: Path, spark: Any, cdc_chain: Any, schema_registry: Any) -> None:
    began = time.monotonic()
    db, database, prefix = cdc_chain.db, "t_avro", "avro"
    servers = cdc_chain.broker.bootstrap_servers
    shop = Shop(db, database, seed=3)
    shop.create(customers=12, products=8, orders=25)
    db.execute([TYPES_DDL], database=database)
    db.transaction([("INSERT INTO types VALUES (" + ",".join(["%s"] * 11) + ")", row) for row in TYPES_ROWS], database=database)
    tables = ["customer", "product", "orders", "types"]
    root = _project(tmp_path / "p", database, servers, prefix, schema_registry.ccompat_url)
    with cdc_chain.connector(prefix, [database], **converters(schema_registry.api_url)) as connect:
        # Round 1: the snapshot and random transactions, in Avro.
        connect.wait_caught_up()
        shop.changes(25)
        db.transaction([("UPDATE types SET amount = amount + 1, d = NULL WHERE id = 1", ()), ("DELETE FROM types WHERE id = 2", ())],
                       database=database)
        rec = _round(spark, root, cdc_chain, connect, database, tables)
        assert rec.ingest is not None and rec.ingest.control > 0 and rec.ingest.tombstones > 0
        assert not _dead(spark, root)

        # Round 2: an added column (a new writer schema, a new id) and a truncate; and new rows of
        # `types`, whose table now exists: lake reads its types back from Hudi (SMALLINT and
        # TINYINT as INT), and the unchanged int16 columns must not be taken for a narrowing.
        db.transaction([("INSERT INTO types VALUES (" + ",".join(["%s"] * 11) + ")", (5, *TYPES_ROWS[1][1:])),
                        ("UPDATE types SET small = -7, tiny = 9 WHERE id = 4", ())], database=database)
        shop.alter()
        gone = shop.refill("product")
        shop.changes(20)
        rec = _round(spark, root, cdc_chain, connect, database, tables)
        assert gone > 0 and rec.ingest is not None and rec.ingest.totals()["product"].deletes >= gone
        assert "tier" in spark.table("ods.customer").columns
        assert not _dead(spark, root)
        with urllib.request.urlopen(f"{schema_registry.ccompat_url}/subjects/{prefix}.{database}.customer-value/versions") as r:
            assert len(json.loads(r.read())) == 2  # the column added upstream: a second writer schema

        # Messages no converter wrote, in a topic of the pattern: each a dead letter with its reason.
        good = _one_avro_value(servers, f"{prefix}.{database}.orders")
        cdc_chain.broker.create_topic(f"{prefix}.junk")
        cdc_chain.broker.produce(f"{prefix}.junk", [(None, b"\x01" + good[1:]), (None, good[: len(good) // 2]),
                                                    (None, b"\x00\x7f\xff\xff\xf0" + good[5:]), (None, b"\x00\x01")])
        shop.changes(5)
        _round(spark, root, cdc_chain, connect, database, tables)
        reasons = sorted(_dead(spark, root).values())
        assert len(reasons) == 4, reasons
        assert any("first byte 0x01, expected the magic byte 0x00" in r for r in reasons), reasons
        assert any("Avro data does not match its writer schema" in r for r in reasons), reasons
        assert any(f"schema id {0x7ffffff0} is not in the schema registry at {schema_registry.ccompat_url}" in r for r in reasons), reasons
        assert any("shorter than the 5-byte wire-format header" in r for r in reasons), reasons

    # A wrong registry (Apicurio's base URL, not its Confluent API) and an unreachable one: a clear
    # error before the stream starts; no table gets a commit.
    from framework.runtime.paths import Layout
    from framework.table import hudi

    project = load_project(root)
    path = Layout(project.warehouse).table("ods.orders")
    before = len(hudi.completed_instants(spark, path))
    shop.changes(3)
    for url, said in ((schema_registry.base, "does not answer GET /subjects as a Confluent-compatible schema registry"),
                      ("http://127.0.0.1:9", "did not answer GET /subjects")):
        cfg = yaml.safe_load((root / "lake.yaml").read_text())
        cfg["ods"]["source"]["schema_registry"]["url"] = url
        cfg["ods"]["source"]["connect_timeout_seconds"] = 1
        (root / "lake.yaml").write_text(yaml.safe_dump(cfg))
        with pytest.raises(EnvironmentProblem) as e:
            run_ingest(spark, load_project(root))
        assert said in e.value.message and e.value.fix, e.value
    assert len(hudi.completed_instants(spark, path)) == before
    print(f"avro chain: {AVRO_CONVERTER}, {time.monotonic() - began:.0f} s")
