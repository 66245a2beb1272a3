"""`lake env drop` takes the locks an environment build takes: a build running in the environment
(a model it owns, or one the project has that the environment does not own yet) makes the drop
wait or fail naming it, and nothing is deleted under it. No Spark: the holder is a real process
holding the lock the build would."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.envs import layout as envs
from framework.project.config import load_project
from framework.runtime.location import Location

REPO = Path(__file__).resolve().parents[2]
HOLDER = """
import sys, time
from pathlib import Path
from framework.runtime.lock import hold
with hold(Path(sys.argv[1]), [sys.argv[2]], command="lake build --env dev dwd.new", timeout=0):
    print("held", flush=True)
    time.sleep(120)
"""


def _project(root: Path) -> Location:
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "dwd").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: t\nwarehouse: warehouse\n")
    (root / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: shop.users, key: [id]}\n")
    (root / "layers" / "dwd" / "old.sql").write_text("select id from ods.users")
    (root / "layers" / "dwd" / "new.sql").write_text("select id from ods.users where id > 1")
    wh = load_project(root).warehouse
    envs.save_state(wh, envs.EnvState(name="dev", created_at=datetime.now(timezone.utc), models=["dwd.old"]))
    table = root / "warehouse" / "_env" / "dev" / "dwd" / "old" / "data.parquet"
    table.parent.mkdir(parents=True)
    table.write_text("the environment's table")
    return wh


@pytest.mark.parametrize("model", ["dwd.old", "dwd.new"])
def test_drop_waits_for_a_build_running_in_the_environment(tmp_path: Path, model: str) -> None:
    wh = _project(tmp_path)
    locks = tmp_path / "warehouse" / "_env" / "dev" / "_lake" / "locks"
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(locks), f"table-{model}"], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        out = CliRunner().invoke(main, ["--project", str(tmp_path), "env", "drop", "dev", "--lock-timeout", "0"])
        assert out.exit_code == 1, out.output
        assert f"table {model} is locked by pid {p.pid}" in out.output and "lake build --env dev dwd.new" in out.output, out.output
        assert (tmp_path / "warehouse" / "_env" / "dev" / "dwd" / "old" / "data.parquet").is_file()
        assert envs.names(wh) == ["dev"]
    finally:
        p.kill()
        p.wait()
    out = CliRunner().invoke(main, ["--project", str(tmp_path), "env", "drop", "dev", "--lock-timeout", "0"])
    assert out.exit_code == 0 and "dropped environment dev (dwd.old)" in out.output, out.output
    assert envs.names(wh) == [] and not (tmp_path / "warehouse" / "_env" / "dev" / "dwd").exists()
    left = sorted(str(p.relative_to(tmp_path / "warehouse" / "_env" / "dev")) for p in (tmp_path / "warehouse" / "_env" / "dev").rglob("*"))
    assert left == ["_lake", "_lake/locks", *sorted(f"_lake/locks/table-{m}.lock" for m in ("dwd.new", "dwd.old"))], left
