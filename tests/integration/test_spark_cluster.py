"""lake on a real Spark standalone cluster (a master and two workers started from pyspark's own
distribution) with the warehouse and the CDC files in S3 (moto): ingest, a full then an
incremental build of a join model and an aggregate model. Executors run in other JVMs: they get
the jars only through `spark.jars`, and nothing they need may exist only on the driver's disk.
The tables must equal a local run of the same events (the session's local Spark and a local
warehouse), and the source's final state."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.table.catalog import register_ods
from framework.transform.runner import build
from tests.helpers import LakeProject
from tests.integration.test_s3_warehouse import (
    MODELS,
    QUERY,
    ROUND_1,
    ROUND_2,
    TABLES,
    _lake,
    _upload,
    expected,
)
from tests.s3_fixture import S3Server
from tests.spark_cluster import cluster_conf, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.s3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[str]:
    yield from running_cluster(tmp_path_factory.mktemp("spark-cluster"))


def _local_run(root: Path, spark: Any) -> dict[str, list[dict[str, Any]]]:
    lp = LakeProject(root, TABLES).add_models(MODELS)
    for events in (ROUND_1, ROUND_2):
        lp.write_cdc(events)
        lp.ingest(spark)
        results = build(spark, lp.project, [], [], incremental=True)
        assert all(r.mode != "failed" for r in results), results
    register_ods(spark, lp.layout)
    (row,) = spark.sql(QUERY).collect()
    return {k: sorted(json.loads(v), key=lambda r: str(r.get("id", r.get("city")))) for k, v in row.asDict().items()}


def test_ingest_and_incremental_builds_on_a_standalone_cluster_equal_a_local_run(
        tmp_path: Path, s3_server: S3Server, cluster: str, spark: Any) -> None:
    bucket = s3_server.new_bucket()
    conf = {**s3_server.spark_conf(), **cluster_conf(cluster)}
    root = tmp_path / "cluster"
    root.mkdir()
    (root / "lake.yaml").write_text(textwrap.dedent(f"""\
        name: onacluster
        warehouse: s3a://{bucket}/wh
        spark: {{master: '{cluster}', conf: {json.dumps(conf)}}}
        ods: {{source: {{kind: files, path: 's3a://{bucket}/cdc'}}}}
        build: {{recompute_below_mib: 0}}
        """))
    for rel, text in {"ods/tables.yaml": TABLES, **MODELS}.items():
        (root / "layers" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "layers" / rel).write_text(text)
    _upload(s3_server, bucket, "cdc/0001.json", ROUND_1)
    # `lake run`: ingest, then build what the events reach (each command is one application on
    # the cluster, ~30 s of start-up here: two cycles instead of four commands).
    _lake(root, "run")
    _upload(s3_server, bucket, "cdc/0002.json", ROUND_2)
    out = _lake(root, "run").stdout
    assert "incremental" in out, out
    (row,) = json.loads(_lake(root, "sql", QUERY, "--format", "json").stdout)
    on_cluster = {k: sorted(json.loads(v), key=lambda r: str(r.get("id", r.get("city")))) for k, v in row.items()}
    assert on_cluster == _local_run(tmp_path / "local", spark)
    assert on_cluster == expected()
