"""`lake init` writes a project that loads, and never overwrites one (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from framework.demo.seed import inventory_sample
from framework.errors import LakeError
from framework.project.config import load_project
from framework.project.scaffold import scaffold

SAMPLE = inventory_sample()


def test_scaffolded_project_loads(tmp_path: Path) -> None:
    root = tmp_path / "my-lake"
    created = scaffold(root, None, cdc_sample=SAMPLE)
    rel = {str(p.relative_to(root)) for p in created}
    assert rel == {
        "lake.yaml",
        "layers/ods/inventory.yaml",
        "layers/dwd/README.md",
        "layers/dws/README.md",
        "layers/dws/customers_by_domain.sql",
        "layers/dws/customers_by_domain.yaml",
        "layers/seed/email_domains.csv",
        "layers/seed/email_domains.yaml",
        "sample/cdc/0001-customers.json",
        ".gitignore",
    }
    project = load_project(root)
    assert project.config.name == "my_lake"
    assert project.config.spark.master == "local[2]"
    assert project.config.ods.source.kind == "files"
    assert project.config.ods.source.path == "sample/cdc"  # lake's sample, never the folder of the user's own CDC
    (table,) = project.ods_tables
    assert (table.source, table.qualified_name, table.key) == ("inventory.customers", "ods.customers", ["id"])
    assert {"warehouse/", ".lake/"} <= set((root / ".gitignore").read_text().split())
    from framework.transform.loader import load_models

    seed = load_models(project)["seed.email_domains"]  # the example seed reads, typed by its YAML
    assert seed.seed is not None and seed.seed.columns == (("domain", "string"), ("kind", "string")) and len(seed.seed.rows) == 4
    assert [c.name for c in seed.config.checks] == ["accepted_values(kind)"]  # so `lake check` has something to check


def test_lake_yaml_has_exactly_the_documented_keys(tmp_path: Path) -> None:
    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    data = yaml.safe_load((tmp_path / "lake.yaml").read_text())
    assert data == {
        "name": "shop",
        "warehouse": "warehouse",
        "spark": {"master": "local[2]", "conf": {}},
        "ods": {"source": {"kind": "files", "path": "sample/cdc", "format": "debezium-json"}},
    }


def test_every_table_key_is_explained(tmp_path: Path) -> None:
    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    text = (tmp_path / "layers" / "ods" / "inventory.yaml").read_text()
    for key in ("source", "name", "key", "ordering", "partition_by", "type", "columns"):
        assert f"{key}:" in text
    assert text.count("#") >= 7


def test_sample_cdc_is_debezium_with_schema(tmp_path: Path) -> None:
    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    lines = (tmp_path / "sample" / "cdc" / "0001-customers.json").read_text().splitlines()
    assert 6 <= len(lines) <= 8
    events = [json.loads(line) for line in lines]
    assert all(set(e) == {"schema", "payload"} for e in events)
    assert {(e["payload"]["source"]["db"], e["payload"]["source"]["table"]) for e in events} == {("inventory", "customers")}


def test_second_scaffold_refuses(tmp_path: Path) -> None:
    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    before = (tmp_path / "lake.yaml").read_text()
    with pytest.raises(LakeError, match="already contains lake.yaml") as info:
        scaffold(tmp_path, "other", cdc_sample=SAMPLE)
    assert info.value.fix
    assert (tmp_path / "lake.yaml").read_text() == before


def test_refuses_to_overwrite_other_files_and_bad_names(tmp_path: Path) -> None:
    (tmp_path / "sample" / "cdc").mkdir(parents=True)
    (tmp_path / "sample" / "cdc" / "0001-customers.json").write_text("mine\n")
    with pytest.raises(LakeError, match="overwrite"):
        scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    assert not (tmp_path / "lake.yaml").exists()
    with pytest.raises(LakeError, match="not valid"):
        scaffold(tmp_path / "x", "9lives", cdc_sample=SAMPLE)


def test_existing_gitignore_is_extended_not_replaced(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.pyc")
    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    assert (tmp_path / ".gitignore").read_text().splitlines()[0] == "*.pyc"
    assert "warehouse/" in (tmp_path / ".gitignore").read_text().split()


def test_the_example_model_and_its_unit_test_load(tmp_path: Path) -> None:
    from framework.modeltest.cases import discover
    from framework.transform.loader import load_models

    scaffold(tmp_path, "shop", cdc_sample=SAMPLE)
    project = load_project(tmp_path)
    models = load_models(project)
    (case,) = discover(project, models, ["dws.customers_by_domain"])
    assert case.incremental and case.key == ("domain",)
    assert case.final["ods.customers"] == ({"id": 1001, "email": "sally.thomas@acme.com"}, {"id": 1002, "email": "george@acme.com"})
