"""Warehouse and CDC locations: local paths and Hadoop URIs, validated before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.project.config import load_project
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.runtime.storage import LocalStorage


def test_a_uri_keeps_its_scheme_and_bucket() -> None:
    wh = Location.parse("s3a://bucket/lake/wh/")
    assert str(wh) == "s3a://bucket/lake/wh" and wh.authority == "bucket" and wh.key == "lake/wh"
    t = Layout(wh).table("ods.user")
    assert str(t) == "s3a://bucket/lake/wh/ods/user" and t.name == "user" and str(t.parent) == "s3a://bucket/lake/wh/ods"
    assert not t.is_local and t.is_object_store
    assert str(Location.parse("hdfs://nn:8020/wh") / "_lake" / "runs") == "hdfs://nn:8020/wh/_lake/runs"


def test_local_paths_resolve_against_the_project(tmp_path: Path) -> None:
    assert Location.parse("wh", tmp_path).local == tmp_path / "wh"
    assert Location.parse(f"file://{tmp_path}/wh").local == tmp_path / "wh"
    assert Location.parse(tmp_path / "wh").is_local


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "lake.yaml").write_text("name: t\n" + body)
    return tmp_path


@pytest.mark.parametrize(("body", "field", "words"), [
    ("warehouse: s3a:/bucket/wh\n", "warehouse", "write s3a://bucket/wh"),
    ("warehouse: s3a:///wh\n", "warehouse", "s3a://BUCKET/path"),
    ("ods: {source: {kind: files, path: 's3a:/b/cdc'}}\n", "ods.source.path", "write s3a://b/cdc"),
    ("warehouse: hdfs://nn/wh\n", "", "locks: {kind: none}"),
    ("warehouse: s3a://b/wh\nlocks: {kind: flock}\n", "", "use `kind: auto`"),
])
def test_a_location_lake_cannot_serve_is_a_config_error(tmp_path: Path, body: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_project(_project(tmp_path, body))
    text = str(e.value)
    assert words in text and "lake.yaml" in text
    if field:
        assert field in text


def test_other_file_systems_run_without_locks_when_told(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, "warehouse: hdfs://nn:8020/wh\nlocks: {kind: none}\n"))
    assert str(p.warehouse) == "hdfs://nn:8020/wh" and p.local_state == tmp_path / "out" / "lake"


def test_local_storage_replaces_whole_files_and_lists_children(tmp_path: Path) -> None:
    fs, root = LocalStorage(), Location.parse(tmp_path / "x")
    assert fs.children(root) == [] and not fs.exists(root)
    fs.write_text(root / "a" / "r.json", "1")
    fs.write_text(root / "a" / "r.json", "22")
    assert fs.read_text(root / "a" / "r.json") == "22"
    assert [c.name for c in fs.children(root / "a")] == ["r.json"]  # no temporary file left
    assert [(str(p), n) for p, n in fs.files(root)] == [(str(root / "a" / "r.json"), 2)]
    fs.delete(root)
    assert not fs.exists(root)
