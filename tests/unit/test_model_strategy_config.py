"""An impossible `strategy:` in a model's YAML is a config error before Spark starts (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.errors import ConfigError, ConfigIssue
from framework.project.config import load_project
from framework.transform.loader import load_models

KAFKA = "ods:\n  source: {kind: kafka, bootstrap_servers: 'localhost:9092', topics: [t]}\n"


def _issues(root: Path, files: dict[str, str], lake: str = "") -> list[ConfigIssue]:
    (root / "lake.yaml").write_text("name: t\n" + lake)
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "t.yaml").write_text(
        "tables:\n  - {source: db.user, key: [id]}\n  - {source: db.k" + ("}" if lake else ", key: [id]}") + "\n")
    for rel, text in files.items():
        (root / "layers" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "layers" / rel).write_text(text)
    try:
        load_models(load_project(root))
    except ConfigError as e:
        return e.issues
    return []


def test_possible_overrides_load(tmp_path: Path) -> None:
    assert _issues(tmp_path, {
        "dws/agg.sql": "select count(1) as num, device_model from ods.user group by device_model",
        "dws/agg.yaml": "strategy: rescan\n",
        "dwd/rows.sql": "select id, name from ods.user",
        "dwd/rows.yaml": "strategy: full\n",
        "dwd/p.py": "def model(ctx):\n    return ctx.read('ods.user')\n",
        "dwd/p.yaml": "depends_on: [ods.user]\nkey: [id]\nstrategy: rescan\n",
    }) == []


def test_impossible_overrides_are_config_errors(tmp_path: Path) -> None:
    issues = _issues(tmp_path, {
        "dwd/rows.sql": "select id, name from ods.user",
        "dwd/rows.yaml": "tags: [x]\nstrategy: aggregate\n",
        "dwd/base.sql": "select id, name from ods.user",
        # dwd.base is row-wise with key id (from ods.user's YAML key): not an aggregate either.
        "dws/over.sql": "select id, name from dwd.base",
        "dws/over.yaml": "description: d\n\nstrategy: aggregate\n",
        "dws/nokey.sql": "select name from ods.user",
        "dws/nokey.yaml": "strategy: rescan\n",
        "dwd/p.py": "def model(ctx):\n    return ctx.read('ods.user')\n",
        "dwd/p.yaml": "depends_on: [ods.user]\nstrategy: rowwise\n",
        "dwd/q.py": "def model(ctx):\n    return ctx.read('ods.user')\n",
        "dwd/q.yaml": "depends_on: [ods.user]\nstrategy: rescan\n",
    })
    got = {(i.file, i.line, i.field): i.problem for i in issues}
    assert got == {
        ("layers/dwd/rows.yaml", 2, "strategy"): "strategy: aggregate is not possible for this SQL: lake infers rowwise (select/filter/project of one upstream: upsert changed keys, delete removed or filtered-out keys)",
        ("layers/dws/over.yaml", 3, "strategy"): "strategy: aggregate is not possible for this SQL: lake infers rowwise (select/filter/project of one upstream: upsert changed keys, delete removed or filtered-out keys)",
        ("layers/dws/nokey.yaml", 1, "strategy"): "strategy: rescan needs a key: add `key: [...]` to the model's YAML",
        ("layers/dwd/p.yaml", 2, "strategy"): "strategy: rowwise is not possible for a Python model: lake cannot read its code",
        ("layers/dwd/q.yaml", 2, "strategy"): "strategy: rescan needs a key",
    }
    assert all(i.fix for i in issues)


@pytest.mark.parametrize("strategy", ["aggregate", "rowwise"])
def test_undecidable_without_spark_is_left_to_the_build(tmp_path: Path, strategy: str) -> None:
    # ods.k has no `key:` (Kafka: the key is stored with the table), so whether the model is
    # row-wise is known only at build time; the builder reports it there.
    assert _issues(tmp_path, {"dwd/m.sql": "select id, name from ods.k", "dwd/m.yaml": f"strategy: {strategy}\n"}, KAFKA) == []
