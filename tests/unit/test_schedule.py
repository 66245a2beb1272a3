"""Schedules: config validation, cron timing, no overlap, coalescing, Airflow DAGs, clean SIGTERM (no Spark)."""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.errors import ConfigError, LakeError
from framework.ops.airflow import render_dags
from framework.ops.schedule import Scheduler, lake_commands, next_fire_times
from framework.project.config import load_project
from framework.project.cron import cron_trigger
from models.config import ScheduleConfig

REPO = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path, schedules: str) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(REPO / "layers", root / "layers")
    (root / "lake.yaml").write_text("name: t\nwarehouse: wh\nschedules:\n" + schedules)
    return root


class Recorder:
    """A real step: sleeps, and records when each run started and ended."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.runs: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, s: ScheduleConfig) -> int:
        start = time.time()
        time.sleep(self.seconds)
        with self.lock:
            self.runs.append((start, time.time()))
        return 0


def _every(cron: str, name: str = "t") -> ScheduleConfig:
    return ScheduleConfig(name=name, cron=cron, what="build", misfire_grace_seconds=60)


def test_bad_cron_timezone_and_selection_name_file_line_field_and_fix(tmp_path: Path) -> None:
    root = _project(tmp_path, (
        "  - name: nightly\n    cron: '0 25 * * *'\n    what: build\n"
        "  - {name: b, cron: '0 2 * * *', timezone: Mars/Base, what: build}\n"
        "  - {name: c, cron: '0 2 * *', what: ingest, incremental: true}\n"
    ))
    with pytest.raises(ConfigError) as e:
        load_project(root)
    text = str(e.value)
    assert "lake.yaml:5: schedules[0].cron: '0 25 * * *' is not a cron expression: hour '25'" in text
    assert "fix: use minute hour day month day-of-week" in text
    assert "lake.yaml:7: schedules[1].timezone: unknown time zone 'Mars/Base'\n  fix: use an IANA name" in text
    assert "schedules[2].cron: '0 2 * *' is not a cron expression: 4 fields" in text
    root = _project(tmp_path / "2", "  - {name: a, cron: '0 2 * * *', what: ingest, select: [dws.x]}\n  - {name: a, cron: '0 3 * * *', what: build}\n")
    with pytest.raises(ConfigError, match=r"(?s)schedules\[0\]: an ingest schedule selects ODS tables, not 'dws.x'.*fix: use e.g. select: \[ods.user\]"):
        load_project(root)


def test_crontab_weekdays_mean_what_crontab_and_airflow_mean() -> None:
    # APScheduler 3 alone would read 1 as Tuesday (agronholm/apscheduler#286).
    t = cron_trigger("0 2 * * 1", "UTC")
    nxt = t.get_next_fire_time(None, datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert nxt is not None and nxt.strftime("%A %H:%M") == "Monday 02:00"
    weekend = next_fire_times(ScheduleConfig(name="w", cron="30 6 * * 6-7", timezone="Europe/Berlin", what="build"), 3,
                              datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert [d.strftime("%a %H:%M %Z") for d in weekend] == ["Sat 06:30 CET", "Sun 06:30 CET", "Sat 06:30 CET"]
    with pytest.raises(ValueError, match="not both"):
        cron_trigger("0 2 1 * 1", "UTC")


def test_commands_per_kind_of_schedule() -> None:
    run = ScheduleConfig(name="n", cron="0 2 * * *", what="run", select=["layer:dws"], exclude=["dws.x"], incremental=True, lock_timeout=0)
    assert lake_commands(run) == [["ingest", "--once", "--lock-timeout", "0"],
                                  ["build", "layer:dws", "--incremental", "--exclude", "dws.x", "--lock-timeout", "0"]]
    assert lake_commands(ScheduleConfig(name="i", cron="* * * * *", what="ingest", select=["ods.user", "ods.product"])) == [
        ["ingest", "--once", "--tables", "ods.user,ods.product"]]


def test_list_prints_next_fire_times_and_checks_selectors(tmp_path: Path) -> None:
    root = _project(tmp_path, "  - {name: nightly, cron: '0 2 * * *', timezone: Asia/Tokyo, what: run, select: [+dws.user_agg], incremental: true}\n")
    out = CliRunner().invoke(main, ["--project", str(root), "schedule", "--list", "--next", "2"])
    assert out.exit_code == 0, out.output
    assert "nightly  cron '0 2 * * *' (Asia/Tokyo)  lake ingest --once && lake build +dws.user_agg --incremental" in out.output
    assert out.output.count("02:00:00 JST") == 2
    bad = _project(tmp_path / "2", "  - {name: n, cron: '0 2 * * *', what: build, select: [dws.user_ag]}\n")
    out = CliRunner().invoke(main, ["--project", str(bad), "schedule", "--list"])
    assert out.exit_code == 1 and "schedules: n: no model named dws.user_ag" in out.output and "did you mean dws.user_agg" in out.output


def test_airflow_file_is_python_with_one_dag_per_schedule(tmp_path: Path) -> None:
    scheds = [ScheduleConfig(name="nightly", cron="0 2 * * 1-5", timezone="Europe/Berlin", what="run", select=["layer:dws"], incremental=True),
              ScheduleConfig(name="cdc", cron="*/10 * * * *", what="ingest")]
    source = render_dags(Path("/srv/my lake"), scheds, lake="/opt/lake/bin/lake")
    tree = ast.parse(compile(source, "dags.py", "exec", ast.PyCF_ONLY_AST))
    dags = [node.context_expr for node in ast.walk(tree) if isinstance(node, ast.withitem)]
    kw = [{k.arg: ast.literal_eval(k.value) for k in d.keywords if k.arg != "start_date"} for d in dags]  # type: ignore[attr-defined]
    assert kw == [
        {"dag_id": "lake_nightly", "schedule": "0 2 * * 1-5", "catchup": False, "max_active_runs": 1, "tags": ["lake"]},
        {"dag_id": "lake_cdc", "schedule": "*/10 * * * *", "catchup": False, "max_active_runs": 1, "tags": ["lake"]},
    ]
    commands = [ast.literal_eval(k.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                for k in node.keywords if k.arg == "bash_command"]
    assert commands == ["/opt/lake/bin/lake --project '/srv/my lake' ingest --once",
                        "/opt/lake/bin/lake --project '/srv/my lake' build layer:dws --incremental",
                        "/opt/lake/bin/lake --project '/srv/my lake' ingest --once"]
    assert "tz='Europe/Berlin'" in source and "ingest >> build" in source
    with pytest.raises(LakeError, match="seconds field"):
        render_dags(Path("/p"), [_every("*/5 * * * * *")])


def test_fires_at_the_cron_times() -> None:
    step, said = Recorder(), []
    sched = Scheduler([_every("*/2 * * * * *")], step, said.append)
    sched.start()
    time.sleep(4.6)
    sched.shutdown()
    assert len(step.runs) >= 2
    for start, _ in step.runs:
        assert int(start) % 2 == 0 and start - int(start) < 0.5  # on an even second, promptly


def test_no_overlap_when_a_run_outlasts_the_interval() -> None:
    step, said = Recorder(seconds=2.2), []
    sched = Scheduler([_every("* * * * * *")], step, said.append)
    sched.start()
    time.sleep(6.5)
    sched.shutdown()  # waits for the run in flight
    runs = sorted(step.runs)
    assert 2 <= len(runs) <= 3
    assert all(prev_end <= start for (_, prev_end), (start, _) in zip(runs, runs[1:], strict=False))
    assert any("skipped: the previous run is still going" in s for s in said)


def test_missed_runs_are_coalesced_into_one() -> None:
    step, said = Recorder(), []
    sched = Scheduler([_every("* * * * * *")], step, said.append)
    sched.start(paused=True)
    time.sleep(3.3)  # three fire times pass while paused
    time.sleep((1.1 - time.time() % 1) % 1)  # resume just after a fire time: the next is ~0.9 s away
    resumed = time.time()
    sched.resume()
    deadline = resumed + 5
    while not step.runs and time.time() < deadline:  # the catch-up run (may be slow on a busy box)
        time.sleep(0.05)
    time.sleep(0.3)
    sched.pause()
    sched.shutdown()
    starts = sorted(s for s, _ in step.runs if s >= resumed)
    assert starts, "no run after resume"
    # Uncoalesced, the three missed fire times run back to back (milliseconds apart); coalesced,
    # there is one catch-up run, and the next one waits for the next fire time (~0.9 s later).
    assert all(b - a > 0.3 for a, b in zip(starts, starts[1:], strict=False)), starts
    assert not [s for s in said if "skipped" in s or "missed" in s]  # ...not one run plus skips


def test_sigterm_lets_the_running_step_finish_then_exits_0(tmp_path: Path) -> None:
    root = _project(tmp_path, "  - {name: agg, cron: '* * * * * *', what: build, select: [dws.user_agg], lock_timeout: 8}\n")
    # The step is a real `lake build` that waits 8 s for a lock another process holds, then fails
    # (exit 1) before Spark; JAVA_HOME points nowhere so it could never start Spark anyway.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from framework.runtime.lock import hold\n"
        "with hold(Path(sys.argv[1]), ['table-dws.user_agg'], command='lake build dws.user_agg', timeout=0):\n"
        "    print('held', flush=True); time.sleep(60)"), str(root / "wh" / "_lake" / "locks")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        env = {**os.environ, "PYTHONPATH": str(REPO), "JAVA_HOME": str(tmp_path / "no-java"), "COLUMNS": "200"}
        sched = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "schedule"],
                                 stderr=subprocess.PIPE, text=True, env=env)
        assert sched.stderr is not None
        lines = []
        while not any("agg: started" in line for line in lines):
            lines.append(sched.stderr.readline())
            assert lines[-1], "".join(lines)
        sent = time.monotonic()
        sched.send_signal(signal.SIGTERM)
        _, rest = sched.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        holder.kill()
        holder.wait()
    out = "".join(lines) + rest
    assert sched.returncode == 0, out
    assert took > 2  # it waited for the step, which was still waiting for the lock (8 s: room for a loaded CI)
    after = out[out.index("SIGTERM: no new runs"):]
    assert "table dws.user_agg is locked by pid" in after
    assert after.index("agg: failed (exit 1)") < after.index("stopped")
    assert out.count("agg: started") == 1


@pytest.mark.parametrize("folder", [
    'x"""; import os; os.system("touch PWNED"); """',
    'y\n"""\nimport os\nos.system("touch PWNED")\n"""\n#',
    "z'''\\\"; __import__('os').system('touch PWNED') #{project}",
])
def test_airflow_file_takes_a_crafted_project_path_only_as_string_literals(tmp_path: Path, folder: str) -> None:
    root = _project(tmp_path / folder, "  - {name: nightly, cron: '0 2 * * *', what: run}\n")
    out_file = tmp_path / "dags.py"
    out = CliRunner().invoke(main, ["--project", str(root), "schedule", "--airflow", str(out_file)])
    assert out.exit_code == 0, out.output
    source = out_file.read_text(encoding="utf-8")
    tree = ast.parse(source, "dags.py")  # parses: no syntax broken open
    compile(source, "dags.py", "exec")  # and byte-compiles (a `from __future__` pushed down would not)
    kinds = [type(n).__name__ for n in tree.body]
    assert kinds == ["Expr", "ImportFrom", "Import", "ImportFrom", "Try", "Assign", "With"]
    assert ast.literal_eval(tree.body[5].value) == str(root)  # type: ignore[attr-defined]
    # Nothing is called but the DAG, its operators and pendulum.datetime, and no name but those.
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls == {"DAG", "BashOperator", "pendulum.datetime"}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert names <= {"DAG", "BashOperator", "ImportError", "pendulum", "PROJECT", "dag_nightly", "ingest", "build"}
    # The path is in string constants only: PROJECT, and quoted for the shell in each command.
    holders = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and "PWNED" in n.value]
    assert holders and all(h == str(root) or shlex.split(h)[2] == str(root) for h in holders)
    assert not list(tmp_path.rglob("PWNED"))
