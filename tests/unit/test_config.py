"""Config errors name file, line, field and fix, and are all reported together (no Spark)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.project.config import load_project


def _project(tmp_path: Path, lake: str, ods: dict[str, str] | None = None) -> Path:
    (tmp_path / "lake.yaml").write_text(textwrap.dedent(lake))
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    for name, text in (ods or {}).items():
        (tmp_path / "layers" / "ods" / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_valid_project_loads(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: demo\n", {"a.yaml": """
        tables:
          - source: test_db.user
            key: [id]
            ordering: [modify_time]
            partition_by: {column: create_time, granularity: month}
        """})
    p = load_project(root)
    (t,) = p.ods_tables
    assert t.qualified_name == "ods.user"
    assert t.partition_by is not None and t.partition_by.derived_name == "year_month"
    assert p.config.ods.source.kind == "files"
    assert p.warehouse.local == root / "warehouse"


def test_unknown_key_names_line_and_suggests(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: demo\n", {"a.yaml": """
        tables:
          - source: test_db.user
            key: [id]
            orderng: [modify_time]
        """})
    with pytest.raises(ConfigError) as e:
        load_project(root)
    (issue,) = e.value.issues
    assert issue.file == "layers/ods/a.yaml"
    assert issue.line == 5
    assert issue.field == "tables[0].orderng"
    assert "did you mean `ordering`" in issue.fix


def test_all_errors_reported_together(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: demo\nspark: {masterr: local}\n", {
        "a.yaml": "tables:\n  - source: nodot\n    key: []\n",
        "b.yaml": "tables:\n  - source: db.t\n    key: [id]\n    type: hbase\n",
    })
    with pytest.raises(ConfigError) as e:
        load_project(root)
    fields = {(i.file, i.field) for i in e.value.issues}
    assert ("lake.yaml", "spark.masterr") in fields
    assert ("layers/ods/a.yaml", "tables[0].source") in fields
    assert ("layers/ods/a.yaml", "tables[0].key") in fields
    assert ("layers/ods/b.yaml", "tables[0].type") in fields
    text = str(e.value)
    assert "use one of 'cow' or 'mor'" in text
    assert "<db>.<table>" in text


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: demo\nspark:\n  master: [local\n")
    with pytest.raises(ConfigError) as e:
        load_project(root)
    (issue,) = e.value.issues
    assert issue.field == "(yaml)" and issue.line is not None and issue.line >= 3
    assert "YAML" in issue.problem


def test_missing_required_key_and_bad_column_type(tmp_path: Path) -> None:
    root = _project(tmp_path, "warehouse: w\n", {"a.yaml": "tables:\n  - source: db.t\n    key: [id]\n    columns: {price: money}\n"})
    with pytest.raises(ConfigError) as e:
        load_project(root)
    by_field = {i.field: i for i in e.value.issues}
    assert by_field["name"].fix == "add `name:` here"
    assert "unknown type 'money'" in by_field["tables[0].columns"].problem


def test_duplicate_table_names(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: d\n", {
        "a.yaml": "tables:\n  - {source: db1.user, key: [id]}\n",
        "b.yaml": "tables:\n  - {source: db2.user, key: [id]}\n",
    })
    with pytest.raises(ConfigError, match="also declared in layers/ods/a.yaml"):
        load_project(root)


def test_missing_lake_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lake init"):
        load_project(tmp_path)


def test_kafka_source_needs_topics(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: d\nods:\n  source: {kind: kafka, bootstrap_servers: 'localhost:9092'}\n")
    with pytest.raises(ConfigError, match="topics"):
        load_project(root)


def test_unknown_table_did_you_mean(tmp_path: Path) -> None:
    root = _project(tmp_path, "name: d\n", {"a.yaml": "tables:\n  - {source: db.user_order, key: [id]}\n"})
    p = load_project(root)
    with pytest.raises(ConfigError, match="did you mean ods.user_order"):
        p.ods_table("ods.user_ordr")


def test_recompute_threshold_default_and_bad_value(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "bad").mkdir()
    assert load_project(_project(tmp_path / "ok", "name: demo\n")).config.build.recompute_below_mib == 256
    with pytest.raises(ConfigError) as e:
        load_project(_project(tmp_path / "bad", "name: demo\nbuild:\n  recompute_below_mib: -1\n"))
    text = str(e.value)
    assert "lake.yaml:3" in text and "build.recompute_below_mib" in text and "greater than or equal to 0" in text


def test_file_source_max_file_age_and_line_size(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "bad").mkdir()
    src = load_project(_project(tmp_path / "ok", "name: demo\n")).config.ods.source
    assert src.kind == "files" and src.max_file_age == "3650d" and src.max_line_bytes == 64 * 1024 * 1024
    with pytest.raises(ConfigError) as e:
        load_project(_project(tmp_path / "bad", "name: demo\nods:\n  source: {kind: files, max_file_age: 10 years}\n"))
    assert "ods.source" in str(e.value) and "e.g. `3650d`" in str(e.value)
