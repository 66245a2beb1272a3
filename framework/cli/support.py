"""What every `lake` command shares at the boundary: the context object, the `--lock-timeout`
option, how errors become messages and exit codes, and printing text lake does not control."""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from framework.errors import LakeError

F = TypeVar("F", bound=Callable[..., Any])
err_console = Console(stderr=True, soft_wrap=True)  # errors stay one line per fact in logs (grep-able)


class Ctx:
    def __init__(self, project_dir: Path, debug: bool, quiet: bool, target: str | None = None) -> None:
        self.project_dir = project_dir
        self.debug = debug
        self.quiet = quiet
        self.target = target  # --target; None: LAKE_TARGET, else lake.yaml's default_target
        self.console = Console(quiet=quiet)

    def project(self):  # type: ignore[no-untyped-def]
        from framework.project.config import load_project
        from framework.table.session import as_submitted

        project = as_submitted(load_project(self.project_dir, self.target))  # a submitted app: the submitter's Spark settings
        if project.target and not self.quiet:  # on stderr: stdout may be JSON or CSV
            err_console.print(f"target: {project.target}", markup=False, highlight=False)
        return project


LOCK_TIMEOUT = click.option(
    "--lock-timeout", default=30.0, show_default=True, metavar="SECONDS",
    help="Wait this long for another lake process writing the same tables; 0 fails at once.")


def stale(name: str, h: Any) -> None:
    """Say that a lock's holder died without releasing it (framework/runtime/lock.py takes it over)."""
    err_console.print(f"note: lock {name} was left by pid {h.pid} on {h.host} (`{h.command}`, "
                      f"since {h.since:%Y-%m-%d %H:%M:%S}Z), which exited without releasing it; taken over",
                      markup=False, highlight=False)


def handle_errors(fn: F) -> F:
    """Print user errors without a stack trace (exit 1); internal errors exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.obj and ctx.obj.debug)
        try:
            return fn(*args, **kwargs)
        except LakeError as e:
            if debug:
                traceback.print_exc()
            _again_without_a_broken_archive(e)
            err_console.print(Text.assemble(("Error:", "bold red"), " " + str(e)), highlight=False)
            sys.exit(1)
        except click.exceptions.Exit:
            raise
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the boundary that turns crashes into messages
            if debug:
                traceback.print_exc()
            if _cancelled(e):  # Ctrl-C on a command of a warm engine cancels its Spark jobs
                err_console.print("interrupted")
                sys.exit(130)
            from framework.runtime.jvm import explain

            died = explain(e)  # the driver JVM ran out of memory, was killed or crashed: say so, not "Internal error"
            if died is not None:
                _again_without_a_broken_archive(died)
                err_console.print(Text.assemble(("Error:", "bold red"), " " + str(died)), highlight=False)
                sys.exit(1)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            err_console.print(
                Text.assemble(("Internal error:", "bold red"), f" {type(e).__name__}: {first[:500]}\n"
                              "  rerun with --debug for the stack trace; Spark's log is in <warehouse>/_lake/logs/spark.log"),
                highlight=False,
            )
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def _cancelled(e: BaseException) -> bool:
    """Whether a command failed because its Spark jobs were cancelled (SparkContext.cancelAllJobs)."""
    return "cancelled as part of cancellation of all jobs" in str(e)


RETRIED = "LAKE_CDS_RETRIED"


def _again_without_a_broken_archive(e: BaseException) -> None:
    """A command that failed on a broken class-data-sharing archive (framework/runtime/cds.py,
    removed by then) runs once more in this process's place: lake's commits are atomic, so the
    rerun completes what the first left. Only once (`LAKE_CDS_RETRIED`)."""
    import os

    archive = getattr(e, "archive", None)
    command = sys.argv[0] if sys.argv else ""
    as_cli = os.path.basename(command) == "lake" or command.endswith(os.path.join("framework", "cli", "__main__.py"))
    if archive is None or os.environ.get(RETRIED) or not as_cli:  # in-process (tests, an embedding app): no exec
        return
    err_console.print(f"note: the JVM's class-data-sharing archive {archive} failed (JDK-8327499) and was removed; running the "
                      "command again without it", markup=False, highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[RETRIED] = "1"
    os.execv(sys.executable, [sys.executable, "-m", "framework.cli", *sys.argv[1:]])


def say(console: Console, text: str) -> None:
    """Print a message holding paths, names or other text lake does not control: rich would parse
    `[...]` in it as markup (a folder named `[/]` raised MarkupError)."""
    console.print(text, markup=False, highlight=False)
