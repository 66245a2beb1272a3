"""Secrets from `${VAR}` stay off disk and off the docs server: `lake demo` writes its lake.yaml
with the references, not their values; `lake docs serve`, over real HTTP, serves the docs and
the run report only, with no directory listing, no symbolic link followed, no dot-file, and
only to requests whose Host header names this machine (DNS rebinding). No Spark."""

from __future__ import annotations

import http.client
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from framework.demo.project import prepared
from framework.project.config import load_project

REPO = Path(__file__).resolve().parents[2]
SECRET, PASSWORD = "s3cr3t-Key-8f1e", "pw-Secret-77aa"


def test_the_demo_writes_variable_references_not_their_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    for name in ("test_db.yaml", "salesdb.yaml"):
        shutil.copyfile(REPO / "layers" / "ods" / name, tmp_path / "layers" / "ods" / name)
    for layer in ("dwd", "dws"):
        shutil.copytree(REPO / "layers" / layer, tmp_path / "layers" / layer)
    (tmp_path / "lake.yaml").write_text(
        "name: mine\nwarehouse: warehouse\n"
        "spark: {master: 'local[2]', conf: {spark.hadoop.fs.s3a.secret.key: '${LAKE_T_SECRET}'}}\n"
        "hudi: {hoodie.clean.commits.retained: '3'}\n"
        "ods: {source: {kind: files, path: cdc}}\n"
        "default_target: dev\n"
        "targets: {dev: {hudi: {hoodie.write.lock.wait_time_ms: '${LAKE_T_PASSWORD}'}}}\n")
    monkeypatch.setenv("LAKE_T_SECRET", SECRET)
    monkeypatch.setenv("LAKE_T_PASSWORD", PASSWORD)
    project = load_project(tmp_path)
    with prepared(project, Console(file=io.StringIO()), fresh=True, lock_timeout=0) as demo:
        written = (demo.root / "lake.yaml").read_text()
        assert SECRET not in written and PASSWORD not in written, written
        assert "${LAKE_T_SECRET}" in written and "${LAKE_T_PASSWORD}" in written, written
        # The demo's own project still gets the values, from the environment, as the project does.
        assert demo.config.spark.conf["spark.hadoop.fs.s3a.secret.key"] == SECRET
        assert demo.config.hudi["hoodie.write.lock.wait_time_ms"] == PASSWORD
        assert demo.config.hudi["hoodie.clean.commits.retained"] == "3"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    """`lake docs serve --no-generate --port 0` on a project whose out/ holds the docs, the
    report, and what must not be served; yields the port."""
    (tmp_path / "lake.yaml").write_text("name: t\nwarehouse: warehouse\n")
    out = tmp_path / "out"
    files = {"docs/index.html": "<h1>docs</h1>", "docs/catalog.json": "{}", "docs/sub/page.txt": "in a folder without index",
             "docs/.hidden": SECRET, "report/runs/index.html": "<h1>runs</h1>", "demo/lake.yaml": f"key: {SECRET}\n"}
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (out / "docs" / "leak.yaml").symlink_to(out / "demo" / "lake.yaml")
    (out / "docs" / "linked").symlink_to(out / "demo", target_is_directory=True)
    p = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "docs", "serve", "--no-generate", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "300"})
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "serving http://127.0.0.1:" in line, line + (p.stdout.read() if p.poll() is not None else "")
        yield int(line.split("http://127.0.0.1:")[1].split("/")[0])
    finally:
        p.terminate()
        p.wait(10)


def _get(port: int, path: str, host: str | None = None) -> tuple[int, str, str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("GET", path, skip_host=True)
    c.putheader("Host", host or f"127.0.0.1:{port}")
    c.endheaders()
    r = c.getresponse()
    body = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, r.getheader("Location") or "", body


def test_docs_serve_serves_the_docs_and_the_report_and_nothing_else(served: int) -> None:
    port = served
    refused = {
        "/demo/lake.yaml": 404,  # out/ beyond the two folders
        "/demo/": 404,
        "/docs/sub/": 404,  # a folder without index.html: no listing
        "/report/": 404,
        "/docs/leak.yaml": 404,  # symbolic links, to a file and to a folder
        "/docs/linked/lake.yaml": 404,
        "/docs/../demo/lake.yaml": 404,
        "/docs/%2e%2e/demo/lake.yaml": 404,
        "/docs/..%2fdemo%2flake.yaml": 404,
        "/docs/.hidden": 404,
    }
    for path, status in refused.items():
        got, _, body = _get(port, path)
        assert got == status and SECRET not in body, (path, got, body)
    assert _get(port, "/docs/index.html")[::2] == (200, "<h1>docs</h1>")
    assert _get(port, "/docs/")[::2] == (200, "<h1>docs</h1>")
    assert _get(port, "/report/runs/index.html")[::2] == (200, "<h1>runs</h1>")
    assert _get(port, "/docs")[:2] == (301, "/docs/")
    assert _get(port, "/")[:2] == (302, "/docs/index.html")
    assert _get(port, "/docs/index.html", host=f"localhost:{port}")[0] == 200
    assert _get(port, "/docs/index.html", host=f"[::1]:{port}")[0] == 200
    # DNS rebinding: a page on attacker.example whose name now points at 127.0.0.1.
    got, _, body = _get(port, "/docs/index.html", host=f"attacker.example:{port}")
    assert got == 403 and "<h1>docs</h1>" not in body and "DNS rebinding" in body, body
    assert _get(port, "/docs/sub/page.txt")[::2] == (200, "in a folder without index")
