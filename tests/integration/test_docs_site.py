"""`lake docs generate/serve` and `lake report` after real ingests and builds run through the CLI:
the facts on the pages against independent sources (Spark's own schema of each Hudi table, the
YAML, the run records), the HTML rendered in headless Chromium, and the server answering."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from tests.helpers import LakeProject, envelope

pytestmark = pytest.mark.spark

ODS = """
tables:
  - source: shop.users
    key: [id]
    description: People who signed up.
    owner: growth
    columns:
      city: {description: "Home city, lower case."}
"""
MODELS = {
    "dws/users_by_city.sql": "-- users per city\nselect city, count(*) as n, sum(score) as score, max(score) as best from ods.users group by city",
    "dws/users_by_city.yaml": (
        "description: Users and their score per city.\nowner: analytics\ntags: [growth, daily]\n"
        "columns:\n  - {name: n, description: Users in the city.}\n  - {name: score, description: Sum of scores.}\n"
        "checks:\n  - between: {column: best, max_value: 10}\n    name: no_high_scores\n    severity: warn\n"
    ),
    "dwd/vip.sql": "select id, city, score from ods.users where score >= 10",
}
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _user(op: str, uid: int, city: str, score: int, pos: int, before: dict[str, Any] | None = None) -> dict[str, Any]:
    return envelope(op, "shop.users", before, {"id": uid, "city": city, "score": score}, pos=pos)


def _cli(lp: LakeProject, *args: str) -> Any:
    out = CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> LakeProject:
    """Two ingests and two builds (full, then incremental), each a `lake` command with a run record."""
    lp = LakeProject(tmp_path_factory.mktemp("docs"), ODS).add_models(MODELS)
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 12, 2), _user("c", 3, "sh", 7, 3)])
    _cli(lp, "ingest")
    _cli(lp, "build")
    lp.write_cdc([_user("u", 1, "sh", 15, 4, before={"id": 1, "city": "sh", "score": 5}), _user("c", 4, "gz", 1, 5)])
    _cli(lp, "ingest")
    _cli(lp, "build", "--incremental")
    return lp


def _runs(lp: LakeProject) -> list[dict[str, Any]]:
    return list(json.loads(_cli(lp, "runs", "--format", "json").stdout))


def test_docs_catalog_matches_spark_the_yaml_and_run_history(built: LakeProject, spark: Any) -> None:
    page = Path(_cli(built, "docs", "generate", "--open").stdout.strip())
    assert page == built.root / "out" / "docs" / "index.html"
    catalog = json.loads((page.parent / "catalog.json").read_text())
    tables = {t["name"]: t for t in catalog["tables"]}
    assert list(tables) == ["ods.users", "dwd.vip", "dws.users_by_city"]
    for name, t in tables.items():  # types as Spark reads the Hudi table, hidden columns left out
        schema = spark.read.format("hudi").load(str(built.layout.table(name))).schema
        expected = [(f.name, f.dataType.simpleString()) for f in schema.fields
                    if not f.name.startswith(("_hoodie_", "_lake_")) and f.name != "_deleted"]
        assert [(c["name"], c["type"]) for c in t["columns"]] == expected, name
    agg = tables["dws.users_by_city"]
    assert (agg["description"], agg["owner"], agg["tags"]) == ("Users and their score per city.", "analytics", ["growth", "daily"])
    cols = {c["name"]: c for c in agg["columns"]}
    assert cols["n"]["description"] == "Users in the city." and cols["score"]["sources"] == ["ods.users.score"]
    assert cols["city"]["sources"] == ["ods.users.city"] and agg["strategy"] == "aggregate"
    assert tables["dwd.vip"]["strategy"] == "rowwise" and tables["ods.users"]["downstreams"] == ["dwd.vip", "dws.users_by_city"]
    ods_cols = {c["name"]: c for c in tables["ods.users"]["columns"]}
    assert ods_cols["city"]["description"] == "Home city, lower case." and tables["ods.users"]["owner"] == "growth"
    runs = _runs(built)
    last_build = [r for r in runs if r["command"] == "build"][-1]
    last_ingest = [r for r in runs if r["command"] == "ingest"][-1]
    assert agg["last_build"]["run_id"] == last_build["run_id"] and agg["last_build"]["mode"] == "incremental"
    assert tables["ods.users"]["last_build"]["run_id"] == last_ingest["run_id"]
    assert [(c["name"], c["success"]) for c in agg["checks"]] == [("no_high_scores", False)]  # best = 15 > 10
    assert catalog["status"] == {"ods.users": "ods", "dwd.vip": "built", "dws.users_by_city": "built"}
    html = page.read_text()
    assert "-- users per city" in html and "Users and their score per city." in html


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (make install installs Debian's chromium package when run as root)")
    return exe


def _render(page: Path, shot: str) -> str:
    exe = _chromium()
    base = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--disable-background-networking",
            "--user-data-dir=" + str(page.parent / ".chromium")]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    ARTIFACTS.mkdir(exist_ok=True)
    subprocess.run([*base, f"--screenshot={ARTIFACTS / shot}", "--window-size=1300,1500", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert (ARTIFACTS / shot).stat().st_size > 10_000
    return dom


def test_docs_and_run_report_render_in_chromium(built: LakeProject) -> None:
    page = Path(_cli(built, "docs", "generate", "--open").stdout.strip())
    dom = _render(page, "docs.png")
    assert dom.count('class="node"') == 3 and 'data-status="built"' in dom
    assert 'id="t-dws.users_by_city"' in dom and "no_high_scores" in dom
    _cli(built, "report")
    index = built.root / "out" / "report" / "runs" / "index.html"
    dom = _render(index, "report-runs.png")
    for run in _runs(built):  # every run, including ingests that checked nothing
        assert run["run_id"] in dom
    assert 'data-series="dws.users_by_city"' in dom and 'class="bar"' in dom and 'class="node"' in dom


def test_docs_serve_answers_over_http(built: LakeProject) -> None:
    _cli(built, "docs", "generate")
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(built.root), "docs", "serve", "--port", "0", "--no-generate"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/docs/index.html")
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.read().decode() == (built.root / "out" / "docs" / "index.html").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
