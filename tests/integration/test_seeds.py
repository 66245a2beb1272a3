"""Seeds through the CLI (in-process, the session's Spark): `layers/seed/tiers.csv` typed by its
YAML loads as the Hudi table seed.tiers, which a row-wise model reads. A changed file writes one
commit holding only the change, which the model takes incrementally in the same `lake run` cycle;
an unchanged file writes nothing; a bad value fails before any build with file, line, column and
fix.

Oracles: the CSV parsed with Python's csv module, typed by hand (Decimal, date), and the
model's rows computed from it in Python; the tables are read by path with plain Spark."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from tests.helpers import LakeProject

pytestmark = pytest.mark.spark

SEED_YAML = """\
description: customer tiers
key: [id]
columns:
  id: bigint
  rate: {type: "decimal(5,2)", description: discount rate}
  since: date
"""
FIRST = "id,tier,rate,since\n1,gold,0.15,2024-01-31\n2,silver,0.05,2023-06-01\n3,gold,0.15,2022-02-28\n4,bronze,,2021-12-01\n"
# 2 changes tier, 3 is deleted, 5 is new; 1 and 4 as they were.
SECOND = "id,tier,rate,since\n1,gold,0.15,2024-01-31\n2,gold,0.10,2023-06-01\n4,bronze,,2021-12-01\n5,\"silver, new\",0.05,2025-03-01\n"


def _oracle(text: str) -> list[tuple[Any, ...]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    return sorted((int(r["id"]), r["tier"], Decimal(r["rate"]) if r["rate"] else None, date.fromisoformat(r["since"])) for r in rows)


def lake(root: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--project", str(root), *args], catch_exceptions=False, env={"COLUMNS": "200"})


def _table(spark: Any, root: Path, name: str, cols: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("hudi").load(str(root / "warehouse" / name.replace(".", "/")))
    return sorted(tuple(r) for r in df.selectExpr(*cols.split(",")).collect())


def _commits(root: Path) -> int:
    return len(list((root / "warehouse" / "seed" / "tiers" / ".hoodie" / "timeline").glob("*.commit")))


def test_seed_loads_typed_rewrites_only_on_change_and_feeds_incremental_models(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables: []\n")
    lp.add_models({"seed/tiers.csv": FIRST, "seed/tiers.yaml": SEED_YAML,
                   "dwd/gold.sql": "SELECT id, rate FROM seed.tiers WHERE tier = 'gold'\n"})
    out = lake(tmp_path, "build", "seed.tiers+")
    assert out.exit_code == 0, out.output
    assert _table(spark, tmp_path, "seed.tiers", "id,tier,rate,since") == _oracle(FIRST)
    assert _commits(tmp_path) == 1

    (tmp_path / "layers" / "seed" / "tiers.csv").write_text(SECOND)
    plan = json.loads(lake(tmp_path, "plan", "--incremental", "--json").stdout)
    seed_plan = next(p for p in plan if p["model"] == "seed.tiers")
    assert seed_plan["mode"] == "full" and "layers/seed/tiers.csv changed (content hash" in seed_plan["reason"]
    # `lake run` (ingest, then build): the changed seed is built, and in the same cycle its reader.
    out = lake(tmp_path, "run", "--json")
    assert out.exit_code == 0, out.output
    results = {r["model"]: r for r in json.loads(out.stdout)["models"]}
    # Only the change is written (2 upserted, 1 deleted) in one commit; the models read it incrementally.
    assert (results["seed.tiers"]["rows_written"], results["seed.tiers"]["rows_deleted"]) == (2, 1)
    assert results["dwd.gold"]["mode"] == "incremental"  # (2 joins the gold rows, 3 leaves them)
    assert _commits(tmp_path) == 2
    expected = _oracle(SECOND)
    assert _table(spark, tmp_path, "seed.tiers", "id,tier,rate,since") == expected
    assert _table(spark, tmp_path, "dwd.gold", "id,rate") == sorted((r[0], r[2]) for r in expected if r[1] == "gold")

    out = lake(tmp_path, "build", "--json")  # unchanged file: no read, no commit, even without --incremental
    assert {r["model"]: r["mode"] for r in json.loads(out.stdout)}["seed.tiers"] == "noop" and _commits(tmp_path) == 2

    (tmp_path / "layers" / "seed" / "tiers.csv").write_text(SECOND + "6,gold,0.1x,2025-01-01\n")
    out = lake(tmp_path, "build")
    assert out.exit_code == 1 and "Traceback" not in out.output
    text = " ".join(out.output.split())
    assert "layers/seed/tiers.csv:6: rate: '0.1x' is not a decimal number; the column is declared decimal(5,2)" in text
    assert "fix: write a number with at most 3 digit(s) before the point and 2 after" in text
