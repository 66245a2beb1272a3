"""`catalog:` in lake.yaml: validated before Spark starts, and what it turns into (Spark confs,
Hudi Hive-sync write options). No Spark here; tests/integration/test_hive_catalog.py runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.demo.services import free_port
from framework.errors import ConfigError, LakeError
from framework.project.config import load_project
from framework.table import hudi
from framework.table.session import catalog_conf, spark_session
from models.catalog import CatalogConfig


def _issue(tmp_path: Path, lake: str) -> tuple[str, str, str]:
    (tmp_path / "lake.yaml").write_text("name: t\n" + lake)
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    (issue,) = e.value.issues
    assert issue.file == "lake.yaml" and issue.line == 2
    return issue.field, issue.problem, issue.fix


def test_default_is_embedded(tmp_path: Path) -> None:
    (tmp_path / "lake.yaml").write_text("name: t\n")
    cfg = load_project(tmp_path).config.catalog
    assert cfg.kind == "embedded" and cfg.uri is None
    assert catalog_conf(cfg) == {"spark.sql.catalogImplementation": "in-memory"}


def test_hive_needs_a_thrift_uri(tmp_path: Path) -> None:
    field, problem, fix = _issue(tmp_path, "catalog: {kind: hive}\n")
    assert field == "catalog" and "needs the metastore's address" in problem and "uri: thrift://host:9083" in fix
    field, problem, fix = _issue(tmp_path, "catalog: {kind: hive, uri: 'http://metastore:9083'}\n")
    assert field == "catalog.uri" and "'http://metastore:9083' is not a metastore address" in problem and "thrift://" in fix
    field, problem, fix = _issue(tmp_path, "catalog: {uri: 'thrift://m:9083'}\n")
    assert field == "catalog" and "`kind: hive`" in fix
    field, problem, fix = _issue(tmp_path, "catalog: {kind: glue}\n")
    assert field == "catalog.kind"


def test_catalog_settings_elsewhere_are_rejected(tmp_path: Path) -> None:
    field, problem, fix = _issue(tmp_path, "spark: {conf: {spark.sql.catalogImplementation: hive}}\n")
    assert field == "spark.conf" and "decided by `catalog:`" in problem and "catalog: {kind: hive" in fix
    field, problem, _ = _issue(tmp_path, "hudi: {hoodie.datasource.hive_sync.enable: 'true'}\n")
    assert field == "hudi" and "hoodie.datasource.hive_sync.enable" in problem
    (tmp_path / "lake.yaml").write_text("name: t\nhudi: {hoodie.datasource.hive_sync.support_timestamp: 'false'}\n")
    assert load_project(tmp_path).config.hudi  # tuning the sync stays allowed


def test_hive_session_conf_and_several_metastores(tmp_path: Path) -> None:
    (tmp_path / "lake.yaml").write_text("name: t\ncatalog: {kind: hive, uri: 'thrift://a:9083, thrift://b:9083'}\n")
    cfg = load_project(tmp_path).config.catalog
    assert catalog_conf(cfg) == {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": "thrift://a:9083,thrift://b:9083"}


def test_write_options_sync_only_with_hive() -> None:
    plain = hudi.write_options(name="user", key=["id"], ordering="_seq", partition=None, catalog=CatalogConfig(), sql_name="ods.user")
    assert not any(k.startswith("hoodie.datasource.hive_sync.") for k in plain)
    hive = CatalogConfig(kind="hive", uri="thrift://127.0.0.1:9083")
    opts = hudi.write_options(name="user", key=["id"], ordering="_seq", partition="year_month", catalog=hive, sql_name="ods.user")
    assert opts["hoodie.datasource.hive_sync.enable"] == "true"
    assert opts["hoodie.datasource.hive_sync.mode"] == "hms"
    assert opts["hoodie.datasource.hive_sync.metastore.uris"] == "thrift://127.0.0.1:9083"
    assert (opts["hoodie.datasource.hive_sync.database"], opts["hoodie.datasource.hive_sync.table"]) == ("ods", "user")
    assert opts["hoodie.datasource.hive_sync.partition_fields"] == "year_month"
    assert opts["hoodie.datasource.hive_sync.partition_extractor_class"] == "org.apache.hudi.hive.MultiPartKeysValueExtractor"
    flat = hudi.write_options(name="dws_agg", key=["_lake_key"], ordering=None, partition=None, catalog=hive, sql_name="dws.agg")
    assert flat["hoodie.datasource.hive_sync.partition_extractor_class"] == "org.apache.hudi.hive.NonPartitionedExtractor"
    # The project's `hudi:` options still come last.
    tuned = hudi.write_options(name="user", key=["id"], ordering=None, partition=None, catalog=hive, sql_name="ods.user",
                               extra={"hoodie.datasource.hive_sync.support_timestamp": "false"})
    assert tuned["hoodie.datasource.hive_sync.support_timestamp"] == "false"
    with pytest.raises(ValueError):
        hudi.write_options(name="user", key=["id"], ordering=None, partition=None, catalog=hive)


def test_unreachable_metastore_fails_before_spark_starts(tmp_path: Path) -> None:
    """Else the run's first commit lands and its Hive sync fails after it, in Java stack."""
    (tmp_path / "lake.yaml").write_text(f"name: t\ncatalog: {{kind: hive, uri: 'thrift://127.0.0.1:{free_port()}'}}\n")
    with pytest.raises(LakeError) as e:
        spark_session(load_project(tmp_path))
    assert "no Hive metastore answers at `catalog.uri` in lake.yaml" in e.value.message
    assert "Connection refused" in e.value.message and "start the metastore" in (e.value.fix or "")
