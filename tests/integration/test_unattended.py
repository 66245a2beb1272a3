"""Running unattended, through the CLI against real servers on loopback: one `lake run
--continuous` process (one JVM) with `alerts:` (a webhook on a stdlib HTTP server, a Slack-form
one, one that is down), `metrics:` (scraped, parsed with Prometheus' own parser; the textfile)
and `lineage:` (OpenLineage events in a file, validated against the spec's JSON schemas).

Cycle 1 ingests a user without a city (the model's `not_null` gate blocks it), events 6 years
old (past `error_after`) and two unreadable lines (dead letters over the threshold): one alert
each. The next cycles rebuild the failing model and alert nothing new. Then an update fixes the
row with a fresh event: the model builds, and each incident recovers (one `resolved` each).
Oracles: the events written here. Then `lake retry` in-process (the session's Spark) after a
failed build: only the failed and skipped models are built again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from framework.cli.main import main
from tests.helpers import LakeProject, envelope
from tests.http_collector import collecting, dead_url
from tests.openlineage_schema import problems

pytestmark = pytest.mark.slow
SECRET = "hook-tok-7c1d2e"
OLD_MS = 1_600_000_000_000  # 2020-09: older than error_after


def _records(root: Path) -> list[dict[str, Any]]:
    runs = root / "wh" / "_lake" / "runs"
    out = []
    for p in sorted(runs.glob("*.json")) if runs.is_dir() else []:
        rec = json.loads(p.read_text())
        if rec["status"] != "running":
            out.append(rec)
    return out


def _wait(root: Path, proc: subprocess.Popen[str], done: Any, what: str, timeout: float = 300) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recs = _records(root)
        if done(recs):
            return recs
        assert proc.poll() is None, f"lake run exited {proc.returncode} waiting for {what}: {proc.communicate()[1][-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_continuous_run_alerts_once_per_incident_recovers_serves_metrics_and_emits_lineage(tmp_path: Path) -> None:
    port = int(dead_url().rsplit(":", 1)[1])  # free a moment ago: the metrics port
    with collecting() as hook:
        root = tmp_path / "p"
        root.mkdir()
        (root / "layers" / "ods").mkdir(parents=True)
        (root / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: shop.users, key: [id], freshness: {error_after: 1h}}\n")
        (root / "layers" / "dws").mkdir()
        (root / "layers" / "dws" / "city_n.sql").write_text("select city, count(*) as n from ods.users group by city")
        (root / "layers" / "dws" / "city_n.yaml").write_text("key: [city]\nchecks:\n  - not_null: [city]\n")
        (root / "lake.yaml").write_text(textwrap.dedent(f"""\
            name: unattended
            warehouse: wh
            spark: {{master: 'local[2]', conf: {{spark.sql.shuffle.partitions: '2', spark.default.parallelism: '2'}}}}
            build: {{recompute_below_mib: 0}}
            alerts:
              dead_letter_threshold: 1
              targets:
                - {{kind: webhook, url: '{hook.url}/h/${{HOOK_TOKEN}}'}}
                - {{kind: webhook, url: '{hook.url}/slack', format: slack}}
                - {{kind: webhook, url: '{dead_url()}/down', timeout_seconds: 2}}
            metrics: {{port: {port}, host: 127.0.0.1, textfile: out/lake.prom}}
            lineage: {{transport: {{type: file, path: out/lineage.jsonl}}}}
            """))
        (root / "cdc").mkdir()
        (root / "cdc" / "0001.json").write_text("\n".join([
            json.dumps(envelope("c", "shop.users", None, {"id": 1, "city": "bj"}, pos=1, ts=OLD_MS)),
            json.dumps(envelope("c", "shop.users", None, {"id": 2, "city": None}, pos=2, ts=OLD_MS)),
            "{not json", "neither this"]) + "\n")
        env = {**os.environ, "HOOK_TOKEN": SECRET, "COLUMNS": "200"}
        proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "run", "--continuous", "--trigger", "1s"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        try:
            _wait(root, proc, lambda rs: len(rs) >= 3, "three cycles")
            assert len(hook.posts) == 2 * 3, [p["body"] for p in hook.posts]  # 3 incidents, 2 live targets: once each
            now_ms = int(time.time() * 1000)
            (root / "cdc" / "0002.json").write_text(json.dumps(envelope("u", "shop.users", {"id": 2, "city": None}, {"id": 2, "city": "sh"},
                                                                        pos=3, ts=now_ms)) + "\n")
            os.utime(root / "cdc" / "0002.json")
            recs = _wait(root, proc, lambda rs: any(r["status"] == "ok" and r["models"] for r in rs), "the fixed build")
            time.sleep(0.2)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                got = _samples(r.read().decode())
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        assert f"metrics: http://127.0.0.1:{port}/metrics" in err

        # Alerts: each incident once, then once recovered; every alert names run, subject, reason, fix.
        alerts = [p["body"] for p in hook.posts if p["path"].startswith("/h/")]
        assert [p["path"] for p in hook.posts if p["path"].startswith("/h/")][0] == f"/h/{SECRET}"
        firing = sorted((a["event"], a["subject"]) for a in alerts if a["status"] == "firing")
        assert firing == [("dead_letter", "(unrouted)"), ("freshness", "ods.users"), ("gate_blocked", "dws.city_n")]
        resolved = sorted((a["event"], a["subject"]) for a in alerts if a["status"] == "resolved")
        assert resolved == firing
        first = recs[0]
        gate = next(a for a in alerts if a["event"] == "gate_blocked")
        assert gate["run_id"] == first["run_id"] and "not_null" in gate["reason"] and gate["fix"]
        fresh = next(a for a in alerts if a["event"] == "freshness" and a["status"] == "firing")
        assert "past its freshness error_after (3600 s)" in fresh["reason"]
        slack = [p["body"] for p in hook.posts if p["path"] == "/slack"]
        assert len(slack) == 6 and all("text" in s and "blocks" in s for s in slack)
        # The down target: every record that tried it says it failed; the runs went on.
        tried = [d for r in recs for d in r["deliveries"] if d["target"].startswith("targets[2]")]
        assert tried and not any(d["ok"] for d in tried) and all("cannot reach the webhook" in d["error"] for d in tried)
        runs_text = "".join(p.read_text() for p in (root / "wh" / "_lake" / "runs").glob("*.json"))
        assert SECRET not in runs_text and "${HOOK_TOKEN}" in runs_text
        assert not (root / "wh" / "_lake" / "alerts" / "incidents.json").read_text().count('"key"')  # all closed

        # Metrics, as Prometheus reads them.
        assert got[("lake_ods_events_total", (("table", "ods.users"),))] == 3
        assert got[("lake_ods_rows_total", (("op", "upsert"), ("table", "ods.users")))] == 3
        assert got[("lake_dead_letter_events_total", (("table", "(unrouted)"),))] == 2
        assert got[("lake_gate_failures_total", (("table", "dws.city_n"),))] >= 2
        assert got[("lake_runs_total", (("command", "run"), ("status", "failed")))] >= 2
        assert got[("lake_source_freshness_status", (("lake_source_freshness_status", "ok"), ("table", "ods.users")))] == 1
        assert 0 <= got[("lake_ods_lag_seconds", (("event", "newest"), ("table", "ods.users")))] < 300
        assert 0 <= got[("lake_model_lag_seconds", (("event", "newest"), ("model", "dws.city_n")))] < 300
        assert got[("lake_checkpoint_lag_commits", (("model", "dws.city_n"), ("upstream", "ods.users")))] == 0
        assert got[("lake_model_build_seconds_count", (("model", "dws.city_n"),))] >= 1
        prom = _samples((root / "out" / "lake.prom").read_text())
        assert prom[("lake_ods_events_total", (("table", "ods.users"),))] == 3

        # Lineage: valid OpenLineage; the model's failures and its success with column lineage and row count.
        events = [json.loads(line) for line in (root / "out" / "lineage.jsonl").read_text().splitlines()]
        bad = [(e["eventType"], e["job"]["name"], problems(e)) for e in events if problems(e)]
        assert not bad, bad[:3]
        model = [e for e in events if e["job"]["name"] == "dws.city_n"]
        assert {e["eventType"] for e in model} == {"START", "FAIL", "COMPLETE"}
        done = next(e for e in model if e["eventType"] == "COMPLETE")
        (out,) = done["outputs"]
        assert out["outputFacets"]["outputStatistics"]["rowCount"] >= 1
        fields = out["facets"]["columnLineage"]["fields"]
        assert [(i["field"], i["transformations"][0]["subtype"]) for i in fields["city"]["inputFields"]] == [("city", "IDENTITY")]
        assert [(i["field"], i["transformations"][0]["type"]) for i in fields["n"]["inputFields"]] == [("city", "INDIRECT")]
        ingest = [e for e in events if e["job"]["name"] == "run" and e["eventType"] in ("COMPLETE", "FAIL")]
        rows = [o["outputFacets"]["outputStatistics"]["rowCount"] for e in ingest for o in e["outputs"]]
        assert sum(rows) == 3 and all(o["name"].endswith("/wh/ods/users") for e in ingest for o in e["outputs"])


def test_retry_builds_only_what_failed_or_was_skipped(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n").add_models({
        "dws/by_city.sql": "select city, count(*) as n from ods.users group by city",
        "dws/by_city.yaml": "key: [city]\nchecks:\n  - not_null: [city]\n",
        "dws/big.sql": "select city, n from dws.by_city where n > 0",
        "dws/big.yaml": "key: [city]\n",
        "dws/ids.sql": "select id from ods.users",
        "dws/ids.yaml": "key: [id]\n"})
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "city": "bj"}, pos=1), envelope("c", "shop.users", None, {"id": 2, "city": None}, pos=2)])
    lp.ingest(spark)

    def lake(*args: str) -> Any:
        return CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False, env={"COLUMNS": "200"})

    first = lake("build", "--skip-tests", "--json")
    assert first.exit_code == 1
    assert {r["model"]: r["mode"] for r in json.loads(first.output)} == {"dws.by_city": "failed", "dws.big": "skipped", "dws.ids": "full"}
    (lp.root / "layers" / "dws" / "by_city.yaml").write_text("key: [city]\nchecks:\n  - not_null: [city]\n    severity: warn\n")
    again = lake("retry", "--json")
    assert again.exit_code == 0, again.output
    head, _, body = again.output.partition("\n")
    assert "1 failed (dws.by_city), 1 skipped (dws.big)" in head
    assert {r["model"]: r["mode"] for r in json.loads(body)} == {"dws.by_city": "full", "dws.big": "full"}  # dws.ids not rebuilt
    assert "nothing to retry" in lake("retry").output
