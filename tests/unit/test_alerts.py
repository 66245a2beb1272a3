"""Alerts (framework/observe/): config errors, once per incident, recovery, a target that is down,
a command target, secrets kept out, and a lost lock or lease stopping the commit. Real HTTP
servers on loopback (tests/http_collector.py), real lock files and a real S3 server; no Spark."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.observe.observer import Observer
from framework.project.config import load_project
from framework.runtime import history
from framework.runtime.lock import LockLostError, assert_held, hold
from framework.runtime.paths import Layout
from models.records import CheckOutcome, ModelResult, RunRecord, SourceFreshness
from tests.http_collector import collecting, dead_url

SECRET = "s3cr3t-t0ken-9f8e7d"


def _project(root: Path, alerts: str) -> Path:
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    (root / "lake.yaml").write_text("name: shop\nwarehouse: wh\n" + textwrap.dedent(alerts))
    return root


def _run(command: str, models: list[ModelResult], error: str | None = None, error_type: str | None = None,
         sources: dict[str, SourceFreshness] | None = None) -> RunRecord:
    rec = history.new_run(command, [command])
    rec.models, rec.sources = models, sources or {}
    rec.status = "failed" if error or any(m.mode in ("failed", "skipped") for m in models) else "ok"
    rec.error, rec.error_type = error, error_type
    rec.finished_at = datetime.now(timezone.utc)
    return rec


def test_config_errors_name_file_line_field_and_fix(tmp_path: Path) -> None:
    root = _project(tmp_path, """\
        alerts:
          targets:
            - {kind: webhook, url: 'hooks.slack.com/x'}
            - {kind: command, command: 'notify-send lake'}
          events: [build_failed, exploded]
        metrics: {host: 127.0.0.1}
        lineage: {transport: {type: kafka}}
        """)
    with pytest.raises(ConfigError) as e:
        load_project(root)
    text = str(e.value)
    assert "lake.yaml:5: alerts.targets[0].url: 'hooks.slack.com/x' is not an http(s) URL\n  fix: give e.g. url: ${SLACK_WEBHOOK_URL}" in text
    assert "alerts.targets[1].command: give the command as a list of arguments" in text
    assert "lake.yaml:7: alerts.events[1]: Input should be 'build_failed', 'ingest_failed'" in text
    assert "metrics: neither port nor textfile is set\n  fix: e.g. metrics: {port: 9464}" in text
    assert "lineage.transport" in text and "fix: set `type:` to one of 'http', 'file'" in text


def test_the_docs_say_a_fixed_incident_arrives_as_its_own_event_with_status_resolved(tmp_path: Path) -> None:
    """Issue 40 item 6: what the guide, the lake.yaml reference and a config error say of
    `recovered` is what alerts.py sends (the test above): the incident's event, `"status": "resolved"`."""
    from framework.cli.main import main
    from framework.site.reference import lake_yaml

    row = next(line for line in lake_yaml(main).splitlines() if line.startswith("| `events` |"))
    assert '`"status": "resolved"`' in row and "the same `event` and `subject`" in row
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "unattended.md").read_text()
    assert "sends `recovered`" not in guide and 'the same `event` and `subject` with `"status": "resolved"`' in guide
    root = _project(tmp_path, "alerts:\n  targets: [{kind: command, command: ['true']}]\n  events: [build_failed, resolved]\n")
    with pytest.raises(ConfigError) as e:
        load_project(root)
    assert "alerts.events: `resolved` is a status, not an event\n  fix: write `recovered` in `events:`" in str(e.value)


def test_an_incident_alerts_once_then_recovers_and_a_down_target_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", SECRET)
    with collecting() as hook:
        root = _project(tmp_path, f"""\
            alerts:
              targets:
                - {{kind: webhook, url: '{hook.url}/hook/${{HOOK_TOKEN}}', headers: {{Authorization: 'Bearer ${{HOOK_TOKEN}}'}}}}
                - {{kind: webhook, url: '{hook.url}/slack', format: slack}}
                - {{kind: webhook, url: '{dead_url()}/down', timeout_seconds: 2}}
            """)
        project = load_project(root)
        layout = Layout(project.warehouse)
        gate = ModelResult(model="dws.sales", strategy="-", mode="failed", reason="quality gate: not_null(city) failed on 2 of 5 rows",
                           error=f"quality gate: not_null(city) failed on 2 of 5 rows (token {SECRET})\n  fix: fix the rows or make the check warn",
                           checks=[CheckOutcome(name="not_null(city)", severity="error", success=False, failing=2, total=5)])
        skipped = ModelResult(model="dws.top", strategy="-", mode="skipped", reason="upstream dws.sales failed")
        first = _run("run", [gate, skipped])
        Observer(project).finish(first)
        history.save(layout, first)
        bodies = [p["body"] for p in hook.posts]
        assert [p["path"] for p in hook.posts] == ["/hook/" + SECRET, "/slack"]  # the secret reaches the server, in the URL only
        assert hook.posts[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
        alert = bodies[0]
        assert (alert["status"], alert["event"], alert["subject"], alert["run_id"]) == ("firing", "gate_blocked", "dws.sales", first.run_id)
        assert alert["reason"].startswith("quality gate: not_null(city) failed on 2 of 5 rows") and alert["fix"] == "fix the rows or make the check warn"
        assert "${HOOK_TOKEN}" in alert["reason"] and SECRET not in json.dumps(bodies)
        assert "dws.sales" in bodies[1]["text"] and first.run_id in bodies[1]["text"] and "Fix: fix the rows" in bodies[1]["text"]
        assert bodies[1]["blocks"][0]["type"] == "section"
        # The down target: the run goes on, and its record says the alert did not go out.
        sent = {(d.target.split()[0], d.ok) for d in first.deliveries}
        assert sent == {("targets[0]", True), ("targets[1]", True), ("targets[2]", False)}
        down = next(d for d in first.deliveries if not d.ok)
        assert "cannot reach the webhook" in (down.error or "") and down.what == "gate_blocked dws.sales"
        stored = layout.fs.read_text(layout.runs / f"{first.run_id}.json")
        assert SECRET not in stored and "${HOOK_TOKEN}" in stored  # records: redacted too (target URL, error text)

        # The same failure next cycle: no new alert (the down target is tried again).
        second = _run("run", [gate.model_copy(), skipped])
        Observer(project).finish(second)
        assert len(hook.posts) == 2
        assert [(d.target.split()[0], d.ok) for d in second.deliveries] == [("targets[2]", False)]

        # Fixed: the incident's own alert again, status resolved, per target that takes it; the incident is closed.
        fixed = _run("build", [ModelResult(model="dws.sales", strategy="aggregate", mode="incremental", reason="ok", rows_written=3)])
        Observer(project).finish(fixed)
        recovered = [p["body"] for p in hook.posts[2:]]
        assert len(recovered) == 2 and recovered[0]["status"] == "resolved" and recovered[0]["run_id"] == fixed.run_id
        assert (recovered[0]["event"], recovered[0]["subject"]) == ("gate_blocked", "dws.sales")  # never an event `recovered`
        assert recovered[0]["opened_by_run"] == first.run_id and "recovered" in recovered[1]["text"]
        Observer(project).finish(_run("build", [gate.model_copy()]))
        assert len(hook.posts) == 6  # a new incident after recovery alerts again


def test_command_target_freshness_dead_letters_and_failed_ingest(tmp_path: Path) -> None:
    out = tmp_path / "alerts.jsonl"
    script = f"import json, os, sys; open({str(out)!r}, 'a').write(json.dumps([json.load(sys.stdin), os.environ['LAKE_ALERT_TEXT']]) + '\\n')"
    root = _project(tmp_path / "p", f"""\
        alerts:
          targets: [{{kind: command, command: [{sys.executable!r}, '-c', {json.dumps(script)}]}}]
          events: [freshness, ingest_failed, recovered]
        """)
    project = load_project(root)
    stale = SourceFreshness(table="ods.orders", status="error", measured_from="source.ts_ms", age_s=7300, error_after_s=7200,
                            checked_at=datetime.now(timezone.utc))
    rec = _run("run", [], error="cannot read s3a://b/cdc: 403 Forbidden\n  fix: check the credentials", error_type="IngestFailed",
               sources={"ods.orders": stale})
    Observer(project).finish(rec)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(a["event"], a["subject"]) for a, _ in got] == [("freshness", "ods.orders"), ("ingest_failed", "ingest")]
    assert "7300 s old" in got[0][0]["reason"] and "lake freshness" in got[0][0]["fix"]
    assert got[1][0]["fix"] == "check the credentials" and got[1][1] == f"lake shop: ingest failed: ingest (run {rec.run_id})"


def test_a_lost_lock_file_stops_the_commit_and_alerts(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    with hold(locks, ["table-dws.sales"], command="lake build", timeout=0):
        assert_held()
        (locks / "table-dws.sales.lock").unlink()  # e.g. someone cleaning _lake/locks
        with pytest.raises(LockLostError) as e:
            assert_held()
    assert "no longer safely holds the lock table-dws.sales" in e.value.message and "nothing of this step was committed" in (e.value.fix or "")
    assert_held()  # released: nothing held, nothing lost
    from framework.observe.incidents import problems
    from models.ops import AlertsConfig

    rec = _run("build", [], error=str(e.value), error_type="LockLostError")
    cfg = AlertsConfig.model_validate({"targets": [{"kind": "command", "command": ["true"]}]})
    (p,) = problems(rec, cfg)
    assert (p.event, p.subject) == ("lock_lost", "table-dws.sales") and "nothing of this step was committed" in p.fix


@pytest.mark.s3
def test_a_lease_taken_over_stops_the_commit(s3_server: object) -> None:
    from framework.runtime.lease import S3Endpoint, S3Lease
    from framework.runtime.location import Location
    from framework.runtime.lock import _held

    bucket = s3_server.new_bucket()  # type: ignore[attr-defined]
    lease = S3Lease(Location.parse(f"s3a://{bucket}/wh/_lake/locks"), "table-ods.t", "table-ods.t", 3,
                    S3Endpoint(s3_server.endpoint, True, "us-east-1"))  # type: ignore[attr-defined]
    assert lease.try_acquire("lake ingest")
    _held.append(lease)
    try:
        s3_server.client().put_object(Bucket=bucket, Key="wh/_lake/locks/table-ods.t.lock", Body=b"{}")  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while lease.problem() is None and time.monotonic() < deadline:  # the next renewal (every second) finds it changed
            time.sleep(0.1)
        with pytest.raises(LockLostError, match="no longer safely holds the lock table-ods.t"):
            assert_held()
    finally:
        _held.remove(lease)
        lease.release()
