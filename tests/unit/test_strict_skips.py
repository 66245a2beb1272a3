"""Strict skips (tests/strict_skips.py): under LAKE_STRICT_SKIPS=1 a skip for a missing install
fails with its reason; nightly opt-ins and optional inputs stay skips; without it all skip. Run
as pytest itself runs in CI: a pytest process on a small test file with the plugin loaded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.strict_skips import strict

REPO = Path(__file__).resolve().parents[2]
TESTS = '''
import pytest
from tests.strict_skips import optional

def test_needs_a_program():
    pytest.skip("chromium is not installed")

def test_needs_a_package():
    pytest.importorskip("lake_no_such_package_42")

@pytest.fixture(scope="session")
def service():
    pytest.skip("the real CDC chain needs MariaDB")

def test_needs_a_service(service):
    pass

@pytest.mark.nightly
@pytest.mark.skipif(True, reason="nightly size: set LAKE_INVARIANT_EXAMPLES")
def test_nightly():
    pass

def test_optional_input():
    optional("needs ../shared/fixtures beside the repo")

def test_runs():
    assert True
'''


def _run(tmp_path: Path, strict: str | None) -> tuple[int, str]:
    (tmp_path / "test_sample.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "LAKE_STRICT_SKIPS"}
    if strict is not None:
        env["LAKE_STRICT_SKIPS"] = strict
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.strict_skips", "-p", "no:cacheprovider", "-rfEs",
                        "-W", "ignore::pytest.PytestUnknownMarkWarning", str(tmp_path / "test_sample.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout


def test_strict_mode_fails_skips_for_missing_installs_only(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "1")
    assert code == 1, out
    # A skip in a fixture's setup fails as an error, as any failure there does.
    assert re.search(r"2 failed, 1 passed, 2 skipped, 1 error", out), out
    failed = set(re.findall(r"(?:FAILED|ERROR) \S+::(\w+)", out))
    assert failed == {"test_needs_a_program", "test_needs_a_package", "test_needs_a_service"}, out
    assert "this skip fails, since it hides a missing install: chromium is not installed" in out
    assert "could not import 'lake_no_such_package_42'" in out and "the real CDC chain needs MariaDB" in out


def test_without_strict_mode_they_all_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(tmp_path, None)
    assert code == 0 and re.search(r"1 passed, 5 skipped", out), out
    for value, on in (("0", False), ("", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("LAKE_STRICT_SKIPS", value)
        assert strict() is on, value


def test_make_test_turns_strict_mode_on() -> None:
    make = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "VENV": ".venv"})
    line = next(x for x in make.stdout.splitlines() if "pytest" in x)
    assert line.startswith("LAKE_STRICT_SKIPS=1 "), make.stdout
