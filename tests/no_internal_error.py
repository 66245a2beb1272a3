"""No "Internal error": a test fails when a `lake` command it runs prints lake's crash message.

`Internal error:` is what the CLI's error boundary (framework/cli/support.py `handle_errors`)
prints for an exception no code path turned into a `LakeError` with a fix: always a defect, even
when the command was expected to fail (exit 1 is a user error, 2 a crash) and the test looked
only at the exit code or at one line of the output. So every place tests run the CLI is watched:

- `click.testing.CliRunner.invoke` (its output and stderr), and
- `subprocess.run` of lake (`python -m framework.cli ...` or a `lake` executable) whose output the
  test captured (`capture_output=True`, `stdout=PIPE`, ...).

The check runs as the command returns, so the failure points at the call. A test of the message
itself opts out with `@pytest.mark.internal_error_expected`. Commands a test starts with
`subprocess.Popen` (crash and streaming tests reading the output as it comes) are not watched.

Registered by tests/conftest.py (`pytest_plugins`); usable alone with `pytest -p tests.no_internal_error`.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

MESSAGE = "Internal error:"
MARKER = "internal_error_expected"
_expected = False  # the running test opted out (MARKER)


def check(output: object, what: str) -> None:
    """Fail (AssertionError) when `output` (text, bytes or None) holds lake's crash message."""
    if output is None or _expected:
        return
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
    if MESSAGE in text:
        at = text.index(MESSAGE)
        raise AssertionError(f"{what} printed lake's {MESSAGE!r}, a crash no code path turned into an error with a fix "
                             f"(tests/no_internal_error.py; @pytest.mark.{MARKER} if the test is about that message):\n"
                             f"{text[at:at + 2000]}")


def is_lake(args: object) -> bool:
    """Whether an argv runs lake: `python -m framework.cli ...` or a `lake` executable."""
    if not isinstance(args, (list, tuple)) or not args:
        return False
    argv = [str(a) for a in args]
    return os.path.basename(argv[0]) == "lake" or any(a == "-m" and b in ("framework.cli", "framework.cli.main")
                                                      for a, b in zip(argv, argv[1:], strict=False))


def _watch_cli_runner() -> None:
    invoke = CliRunner.invoke

    @functools.wraps(invoke)
    def watched(self: CliRunner, cli: Any, args: Any = None, *more: Any, **kwargs: Any) -> Result:
        result = invoke(self, cli, args, *more, **kwargs)
        check(result.output, f"`lake {' '.join(args) if isinstance(args, (list, tuple)) else args or ''}` (CliRunner)")
        if result.stderr_bytes is not None:
            check(result.stderr_bytes, "its stderr")
        return result

    CliRunner.invoke = watched  # type: ignore[method-assign]


def _watch_subprocess_run() -> None:
    run = subprocess.run

    @functools.wraps(run)
    def watched(*args: Any, **kwargs: Any) -> Any:
        result = run(*args, **kwargs)
        if is_lake(result.args):
            what = " ".join(str(a) for a in result.args)
            check(result.stdout, f"`{what}` (stdout)")
            check(result.stderr, f"`{what}` (stderr)")
        return result

    subprocess.run = watched


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: the test checks lake's {MESSAGE!r} message itself (tests/no_internal_error.py)")
    if not getattr(CliRunner.invoke, "__wrapped__", None):
        _watch_cli_runner()
    if not getattr(subprocess.run, "__wrapped__", None):
        _watch_subprocess_run()


@pytest.fixture(autouse=True)
def _internal_error_opt_out(request: pytest.FixtureRequest) -> Iterator[None]:
    global _expected
    _expected = request.node.get_closest_marker(MARKER) is not None
    yield
    _expected = False
