"""lake on a real Spark standalone cluster (a master and a worker started from pyspark's own
distribution) with the warehouse and the CDC files in S3 (moto): ingest, a full then an
incremental build of a join model and an aggregate model. Executors run in other JVMs: they get
the jars only through `spark.jars`, and nothing they need may exist only on the driver's disk.
The tables must equal the source's final state (the models' SQL done in Python), which a local
run of the same events equals too (test_s3_warehouse.py)."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


# make test's budget: test_spark_submit_runs_lake_as_the_submitted_application (below) runs lake on
# this cluster against the bucket too (ingest and every model, read back by hudi-rs); this one adds
# lake's own driver against a cluster master, an incremental cycle and `lake sql` there (~8 minutes
# of a worker). Nightly: LAKE_NIGHTLY=1.
@pytest.mark.nightly
@pytest.mark.skipif(not os.environ.get("LAKE_NIGHTLY"), reason="nightly: set LAKE_NIGHTLY=1")
def test_ingest_and_incremental_builds_on_a_standalone_cluster_equal_the_source(
        tmp_path: Path, s3_server: S3Server, cluster: str) -> None:
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
    # The source's final state with the models' SQL done in Python (a local run of the same events
    # equals it too: test_s3_warehouse.py), so no second, local run is needed to compare with.
    assert on_cluster == expected()


USER_CITY = {  # a Python model with a Python UDF: executors run it with the archive's interpreter
    "dwd/user_city.py": ("from pyspark.sql import functions as F, types as T\n\n\n"
                         "def model(ctx):\n"
                         "    upper = F.udf(lambda s: None if s is None else s.upper(), T.StringType())\n"
                         "    return ctx.read('ods.users').select('id', upper('city').alias('city_upper'))\n"),
    "dwd/user_city.yaml": "key: [id]\ndepends_on: [ods.users]\n",
}


def _hudi_rows(s3: S3Server, bucket: str, table: str) -> list[dict[str, Any]]:
    """A table as hudi-rs (no Spark, no lake) reads it from the bucket: data columns, by key."""
    import pyarrow as pa
    from hudi import HudiTableBuilder

    from tests.s3_fixture import CREDENTIALS

    opts = {"aws_endpoint_url": s3.endpoint, "aws_allow_http": "true", "aws_region": "us-east-1",
            "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}
    t = HudiTableBuilder.from_base_uri(f"s3://{bucket}/wh/{table.replace('.', '/')}").with_storage_options(opts).build()
    rows = pa.Table.from_batches(t.read()).to_pylist()
    return sorted(({k: v for k, v in r.items() if not k.startswith("_")} for r in rows), key=lambda r: str(r.get("id", r.get("city"))))


# spark-submit against the cluster: a submit archive built, lake run as the submitted application
# (~6.5 minutes of a worker). Nightly: LAKE_NIGHTLY=1, with the cluster run above; make test's
# budget could not hold both beside the rest.
@pytest.mark.nightly
@pytest.mark.skipif(not os.environ.get("LAKE_NIGHTLY"), reason="nightly: set LAKE_NIGHTLY=1")
def test_spark_submit_runs_lake_as_the_submitted_application(tmp_path: Path, s3_server: S3Server, cluster: str) -> None:
    """`spark-submit` (pyspark's own) to the standalone cluster, client mode: lake's driver program
    from `make submit-archive`'s lake_submit.py, lake and its dependencies from the archive (the
    driver's interpreter unpacked from it, the executors' shipped with --archives ...#env), jars
    and settings from --jars/--conf only. `run --once` ingests the CDC in the bucket and builds the
    models; hudi-rs reads the tables back. The event log shows the application kept the
    submitter's name, jars and settings (lake adopted the session, configured nothing)."""
    import subprocess
    import tarfile

    import pyspark

    from framework.ops.archive import build as build_archive
    from framework.runtime.jars import HUDI_BUNDLE, ensure_jar, s3_jars
    from framework.table.session import HUDI_STATIC, JVM_OPTIONS

    repo = Path(__file__).resolve().parents[2]
    dist = tmp_path / "dist"
    archive = build_archive(dist, Path(os.environ.get("LAKE_SUBMIT_VENV", repo / "build" / "submit-venv")), compress_level=1)
    driver_env = tmp_path / "driver-env"  # client mode: the driver runs here, from the same archive
    with tarfile.open(archive) as tar:
        tar.extractall(driver_env, filter="tar")
    bucket = s3_server.new_bucket()
    root = tmp_path / "project"
    (root / "layers").mkdir(parents=True)
    (root / "lake.yaml").write_text(f"name: submitted\nwarehouse: s3a://{bucket}/wh\nods: {{source: {{kind: files, path: 's3a://{bucket}/cdc'}}}}\n")
    for rel, text in {"ods/tables.yaml": TABLES, **MODELS, **USER_CITY}.items():
        (root / "layers" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "layers" / rel).write_text(text)
    _upload(s3_server, bucket, "cdc/0001.json", ROUND_1)
    _upload(s3_server, bucket, "cdc/0002.json", ROUND_2)
    events = tmp_path / "events"
    events.mkdir()
    jars = [str(ensure_jar(HUDI_BUNDLE)), *(str(p) for p in s3_jars())]
    conf = {**HUDI_STATIC, **s3_server.spark_conf(), **cluster_conf(cluster), "spark.sql.shuffle.partitions": "3",
            "spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.executor.extraJavaOptions": JVM_OPTIONS,
            "spark.pyspark.python": "./env/bin/python", "spark.pyspark.driver.python": str(driver_env / "bin" / "python"),
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}"}
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", cluster, "--deploy-mode", "client",
           "--name", "lake-submitted", "--jars", ",".join(jars), "--archives", f"{archive}#env",
           *(x for k, v in conf.items() for x in ("--conf", f"{k}={v}")),
           str(dist / "lake_submit.py"), "--project", str(root), "run", "--once"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stdout, f"{r.stdout}\n{r.stderr[-4000:]}"
    want = expected()
    assert _hudi_rows(s3_server, bucket, "ods.users") == want["users"]
    assert _hudi_rows(s3_server, bucket, "ods.orders") == want["orders"]
    assert [{k: r[k] for k in ("id", "user_id", "amount", "city")} for r in _hudi_rows(s3_server, bucket, "dwd.order_user")] == want["joined"]
    assert [{k: r[k] for k in ("city", "n", "total", "lo", "hi")} for r in _hudi_rows(s3_server, bucket, "dws.city_sales")] == want["sales"]
    assert [{k: r[k] for k in ("id", "city_upper")} for r in _hudi_rows(s3_server, bucket, "dwd.user_city")] == [
        {"id": u["id"], "city_upper": u["city"].upper()} for u in want["users"]]
    (log,) = list(events.iterdir())
    env_update = next(json.loads(line) for line in log.read_text().splitlines() if '"SparkListenerEnvironmentUpdate"' in line)
    props = dict(env_update["Spark Properties"])
    assert props["spark.app.name"] == "lake-submitted" and props["spark.sql.shuffle.partitions"] == "3"
    assert sorted(Path(j).name for j in props["spark.jars"].split(",")) == sorted(Path(j).name for j in jars)
