"""Every `--json` / `--format json` output of the `lake` command, each in a fresh process: exit 0
and stdout that parses as JSON of the documented shape (stdout holds nothing else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import LakeProject, envelope

ODS = """
tables:
  - {source: shop.t, key: [id]}
  - {source: shop.b, key: [id]}
"""
MODELS = {
    "dws/agg.sql": "select k, count(*) as n from ods.t group by k",
    "dws/agg.yaml": "key: [k]\nchecks:\n  - not_null: [k]\n",
}


def lake(root: Path, *args: str) -> Any:
    """Run `lake --project root ARGS`, assert exit 0, return stdout parsed as JSON."""
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=300)
    assert r.returncode == 0, f"lake {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"lake {' '.join(args)}: stdout is not JSON ({e}):\n{r.stdout}") from e


def _row(op: str, i: int, k: str, pos: int) -> dict[str, Any]:
    return envelope(op, "shop.t", None, {"id": i, "k": k}, pos=pos)


def test_every_json_output_parses(tmp_path: Path) -> None:
    lp = LakeProject(tmp_path, ODS).add_models(MODELS)
    lp.write_cdc([_row("c", 1, "a", 1), _row("c", 2, "a", 2), _row("c", 3, "b", 3)])

    summary = lake(tmp_path, "ingest", "--once", "--json")
    assert summary["status"] == "ok" and summary["batches"][0]["events"] == 3
    (t,) = summary["batches"][0]["tables"].values()
    assert (t["table"], t["upserts"]) == ("ods.t", 3) and isinstance(summary["started_at"], str)

    (tmp_path / "b.csv").write_text("id,name\n1,x\n2,y\n")
    boot = lake(tmp_path, "ingest", "--bootstrap", "ods.b", "--path", str(tmp_path / "b.csv"), "--json")
    assert boot["table"] == "ods.b" and boot["rows"] == 2

    (planned,) = lake(tmp_path, "plan", "--incremental", "--json")
    assert (planned["model"], planned["mode"], planned["strategy"]) == ("dws.agg", "full", "aggregate")
    assert "no checkpoint" in planned["reason"] and planned["changed_rows"] == {} and set(planned["upstream_end"]) == {"ods.t"}

    # The crash of issue 16: a built model's `committed_at` (a datetime) in `build --json`.
    (built,) = lake(tmp_path, "build", "--json")
    assert built["model"] == "dws.agg" and built["mode"] == "full" and built["rows_written"] == 2
    assert isinstance(built["committed_at"], str) and built["checks"][0]["success"] is True

    lp.write_cdc([_row("c", 4, "c", 4)])

    cycle = lake(tmp_path, "run", "--json")  # one cycle: one JSON line
    assert cycle["command"] == "run" and cycle["status"] == "ok" and cycle["ingest"]["batches"][0]["events"] == 1
    assert [m["model"] for m in cycle["models"]] == ["dws.agg"] and "dws.agg" in cycle["freshness"]

    checked = lake(tmp_path, "check", "--format", "json")
    assert checked["skipped"] == [] and [r["model"] for r in checked["results"]] == ["dws.agg"]
    assert checked["results"][0]["results"][0]["success"] is True and isinstance(checked["results"][0]["evaluated_at"], str)

    rows = lake(tmp_path, "sql", "select k, n from dws.agg order by k", "--format", "json")
    assert rows == [{"k": "a", "n": 2}, {"k": "b", "n": 1}, {"k": "c", "n": 1}]

    # No Spark from here on.
    runs = lake(tmp_path, "runs", "--format", "json")
    assert [r["command"] for r in runs] == ["ingest", "build", "run", "check"] and all(r["status"] == "ok" for r in runs)
    shown = lake(tmp_path, "runs", "show", runs[1]["run_id"])
    assert shown["run_id"] == runs[1]["run_id"] and shown["models"][0]["model"] == "dws.agg"
    reported = lake(tmp_path, "report", "--format", "json")
    by_id = {r["run_id"]: r for r in reported}
    assert by_id[checked["run_id"]]["quality"][0]["model"] == "dws.agg"
    graph = lake(tmp_path, "dag", "--format", "json")
    assert {n["name"] for n in graph["nodes"]} >= {"ods.t", "dws.agg"} and ["ods.t", "dws.agg"] in graph["edges"]
    traced = lake(tmp_path, "lineage", "dws.agg.k", "--format", "json")
    assert "ods.t" in json.dumps(traced)
