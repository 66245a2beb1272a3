"""The S3 lease lock (framework/runtime/lease.py) between real processes against a real S3-compatible
server: one holder at a time, a holder named when the lock is busy, a dead holder's lease taken
over once it expires, and a clean release freeing it at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.s3_fixture import S3Server

pytestmark = pytest.mark.s3

WORKER = r"""
import json, sys, time
from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.lock import hold
from models.config import LockSettings

where, conf, mode, arg = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
settings = LockSettings(kind="s3", lease_seconds=10)
def stale(name, h):
    print(f"stale {h.pid} {h.command}", flush=True)
if mode == "hold":  # take the lock, say so, keep it until killed
    with hold(Location.parse(where), ["table-ods.user"], command=f"holder {arg}", timeout=0, settings=settings, spark_conf=conf, on_stale=stale):
        print("held", flush=True)
        time.sleep(3600)
elif mode == "try":  # take it within `arg` seconds, or print the error
    try:
        t0 = time.monotonic()
        with hold(Location.parse(where), ["table-ods.user"], command="trier", timeout=float(arg), settings=settings, spark_conf=conf, on_stale=stale):
            print(f"got after {time.monotonic() - t0:.1f}", flush=True)
    except LakeError as e:
        print(f"refused: {e} | {e.fix}", flush=True)
        sys.exit(3)
else:  # "count": 15 rounds of lock, enter, work, exit, unlock, logged to a shared file
    for _ in range(15):
        with hold(Location.parse(where), ["table-ods.user"], command=f"counter {arg}", timeout=120, settings=settings, spark_conf=conf):
            with open(sys.argv[5], "a") as f:
                f.write(f"enter {arg}\n")
            time.sleep(0.05)
            with open(sys.argv[5], "a") as f:
                f.write(f"exit {arg}\n")
"""


def _start(s3: S3Server, where: str, mode: str, arg: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WORKER, where, json.dumps(s3.spark_conf()), mode, arg, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
                            cwd=Path(__file__).resolve().parents[2])


def _run(s3: S3Server, where: str, mode: str, arg: str) -> tuple[int, str]:
    p = _start(s3, where, mode, arg)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out


def test_one_holder_a_named_refusal_and_a_dead_holders_lease_taken_over(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    where = f"s3a://{bucket}/wh/_lake/locks"
    holder = _start(s3_server, where, "hold", "A")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, out = _run(s3_server, where, "try", "0")
        assert code == 3 and f"locked by pid {holder.pid}" in out and "holder A" in out, out
        assert "lease expires 10 s after its last renewal" in out, out
        time.sleep(12)  # longer than a lease: the holder's renewals keep it
        code, out = _run(s3_server, where, "try", "0")
        assert code == 3, out
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    code, out = _run(s3_server, where, "try", "40")
    assert code == 0 and f"stale {holder.pid} holder A" in out, out
    assert float(out.split("got after ")[1]) <= 25, out  # within about one lease of the death
    # Released cleanly (the `try` above): the next taker gets it at once, with no stale holder.
    code, out = _run(s3_server, where, "try", "0")
    assert code == 0 and "stale" not in out, out
    assert s3_server.keys(bucket, "wh/_lake/locks/") == []


def test_two_processes_never_hold_it_at_once(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    where, log = f"s3a://{bucket}/wh/_lake/locks", tmp_path / "log"
    procs = [_start(s3_server, where, "count", name, str(log)) for name in ("A", "B")]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    lines = log.read_text().split("\n")[:-1]
    assert len(lines) == 60
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):  # every enter is followed by its own exit
        assert enter.startswith("enter ") and leave == "exit " + enter.split()[1], lines
    assert {line.split()[1] for line in lines} == {"A", "B"}
