"""tests/no_internal_error.py: a test whose `lake` command prints "Internal error:" fails, through
CliRunner (a real click command behind lake's own error boundary) and through `subprocess.run`
(a `lake` executable), unless the test opts out; other output and other programs pass. Run as in
CI: a pytest process on a small test file with the plugin loaded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = '''
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from framework.cli.support import Ctx, handle_errors
from framework.errors import LakeError


@click.command()
@click.argument("what")
@handle_errors
def cmd(what):
    if what == "crash":
        raise KeyError("no such thing")
    if what == "user":
        raise LakeError("bad input", fix="give good input")
    click.echo("fine")


def test_crash_through_cli_runner():
    assert CliRunner().invoke(cmd, ["crash"]).exit_code == 2  # the test looks only at the exit code


def test_user_error_through_cli_runner():
    assert CliRunner().invoke(cmd, ["user"]).exit_code == 1


@pytest.mark.internal_error_expected
def test_opted_out():
    assert "Internal error: KeyError" in CliRunner().invoke(cmd, ["crash"]).output


def test_crash_through_subprocess(tmp_path):
    exe = tmp_path / "lake"
    exe.write_text("#!/bin/sh\\necho 'Internal error: KeyError: x' >&2\\nexit 2\\n")
    exe.chmod(0o755)
    assert subprocess.run([str(exe), "build"], capture_output=True, text=True).returncode == 2


def test_other_programs_are_not_lake():
    subprocess.run([sys.executable, "-c", "print('Internal error: not lake')"], capture_output=True, check=True)
'''


def test_a_crash_fails_the_test_unless_it_opts_out(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.no_internal_error", "-p", "no:cacheprovider", "-rf",
                        str(tmp_path / "test_sample.py")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout
    assert re.search(r"2 failed, 3 passed", p.stdout), p.stdout
    assert set(re.findall(r"FAILED \S+::(\w+)", p.stdout)) == {"test_crash_through_cli_runner", "test_crash_through_subprocess"}, p.stdout
    assert "`lake crash` (CliRunner) printed lake's 'Internal error:'" in p.stdout and "Internal error: KeyError: 'no such thing'" in p.stdout
    assert "/lake build` (stderr) printed lake's 'Internal error:'" in p.stdout, p.stdout
