"""lake's manual (mkdocs + material, docs/): built with `mkdocs build --strict` as `make docs` builds
it (a broken link, a page missing from the nav or an unknown reference marker fails), then a
generated page rendered in headless Chromium. Not `lake docs` (test_docs_site.py), which writes
one project's table catalog. Starts no JVM."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("manual")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def test_manual_builds_strictly_with_generated_reference(site: Path) -> None:
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for text in ('id="lake-build"', "--lock-timeout", 'id="lake-dead-letter-replay"', "--skip-tests"):
        assert text in cli, text
    yaml_page = (site / "reference" / "lake-yaml" / "index.html").read_text()
    assert 'id="ods-source-kafka"' in yaml_page and "bootstrap_servers" in yaml_page and "recompute_below_mib" in yaml_page
    checks = (site / "reference" / "checks" / "index.html").read_text()
    assert "expect_column_values_to_not_be_null" in checks and "accepted_values" in checks
    changelog = (site / "changelog" / "index.html").read_text()
    assert "Unreleased" in changelog and "lake:include" not in changelog
    assert not list(site.rglob("hooks/*")), "the build hook must not be published"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (make install installs Debian's chromium package when run as root)")
    return exe


def test_cli_reference_renders_in_chromium_with_nav_and_options(site: Path) -> None:
    page = site / "reference" / "cli" / "index.html"
    base = [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--disable-background-networking",
            "--user-data-dir=" + str(site.parent / ".chromium")]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "manual-cli.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1300,1400", page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000
    nav = re.findall(r'class="md-nav__link[^"]*"[^>]*>\s*(?:<[^>]+>\s*)*([^<]+?)\s*<', dom)
    for entry in ("Quick start", "Concepts", "Reference", "Guides", "Limits", "Architecture"):
        assert any(entry in n for n in nav), (entry, nav[:40])
    # a table row of the generated reference, as the browser laid it out: `lake build --incremental`
    build = dom.split('id="lake-build"', 1)[1].split('id="lake-check"', 1)[0]
    assert re.search(r"<td><code>--incremental</code></td>\s*<td>flag</td>", build), build[:2000]
