"""A newcomer's first hour, through the `lake` command in fresh processes as a user types it:
`lake init`, then every command of the CLI reference (docs/reference/cli.md) that can run on what
it makes, in one project; each exits 0 without "Internal error". Then the quick start's step of
declaring one's own tables and pointing the files source at one's own folder: lake's own sample
never reaches the dead letter nor an alert (issue 40 item 5).

Oracles: the scaffold's files (seven sample events of inventory.customers, an example model, a
seed with one check) and the event written here; never lake's own computation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import envelope

pytestmark = pytest.mark.slow


def lake(root: Path, *args: str) -> str:
    """`lake --project ROOT ARGS` in a new process (LAKE_JVM_OPTIONS from tests/conftest.py); its
    stdout, after checking that it exited 0 without lake's crash message."""
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200"}, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Internal error" not in out, f"lake {' '.join(args)}: exit {r.returncode}\n{out}"
    return r.stdout


def init(root: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "framework.cli", "init", str(root)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Next:" in r.stdout, r.stdout + r.stderr


def test_every_command_runs_on_a_new_project(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    init(root)
    assert "1 micro-batch(es), 7 events" in lake(root, "ingest", "--once")
    assert "dws.customers_by_domain" in lake(root, "plan")
    assert "dws.customers_by_domain" in lake(root, "dag")
    assert "customers_per_domain" in lake(root, "test")
    lake(root, "build")
    rows = json.loads(lake(root, "sql", "select domain, customers from dws.customers_by_domain order by domain", "--format", "json"))
    assert rows and all(set(r) == {"domain", "customers"} and r["customers"] > 0 for r in rows)
    checked = lake(root, "check")
    assert "seed.email_domains" in checked and "accepted_values(kind)" in checked and "pass" in checked
    lake(root, "freshness")
    page = Path(lake(root, "docs", "generate", "--open").strip())
    pages = {t["name"]: t for t in json.loads((page.parent / "catalog.json").read_text())["tables"]}
    assert (pages["seed.email_domains"]["kind"], pages["ods.customers"]["downstreams"]) == ("seed", ["dws.customers_by_domain"])
    lake(root, "report")
    runs = lake(root, "runs")
    assert "ingest" in runs and "build" in runs and "check" in runs
    assert "ods.customers.email" in lake(root, "lineage", "dws.customers_by_domain.customers")
    assert "no such events" in lake(root, "dead-letter", "list")
    lake(root, "env", "list")


def test_the_sample_never_reaches_the_dead_letter_of_ones_own_tables(tmp_path: Path) -> None:
    """The quick start without Kafka: the files source pointed at one's own folder (`cdc`), one's
    own tables declared in place of the example, alerts on. The first ingest takes one's own event
    only: nothing of lake's sample is read, dead-lettered or alerted."""
    root = tmp_path / "shop"
    init(root)
    alerts = tmp_path / "alerts.jsonl"
    config = yaml.safe_load((root / "lake.yaml").read_text())
    config["ods"]["source"]["path"] = "cdc"
    config["alerts"] = {"targets": [{"kind": "command", "command": ["sh", "-c", 'cat >> "$0"', str(alerts)]}]}
    (root / "lake.yaml").write_text(yaml.safe_dump(config))
    (root / "layers" / "ods" / "inventory.yaml").write_text("tables:\n  - source: shop.users\n    key: [id]\n")
    (root / "cdc").mkdir(exist_ok=True)
    (root / "cdc" / "0001.json").write_text(json.dumps(envelope("c", "shop.users", None, {"id": 1, "name": "ann"}, pos=4)) + "\n")
    summary = json.loads(lake(root, "ingest", "--once", "--json"))
    assert summary["status"] == "ok" and [(b["events"], b["dead_letter"]) for b in summary["batches"]] == [(1, 0)], summary
    assert "no such events" in lake(root, "dead-letter", "list")
    assert not alerts.exists(), alerts.read_text()
