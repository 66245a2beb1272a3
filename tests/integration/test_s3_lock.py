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
from typing import Any

import pytest

from tests.s3_fixture import S3Server

pytestmark = pytest.mark.s3

WORKER = r"""
import json, sys, time
from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.lock import assert_held, hold
from models.config import LockSettings

a = json.loads(sys.argv[1])
where, conf, mode, arg = Location.parse(a["where"]), a["conf"], a["mode"], a["arg"]
# Leases shorter than lake.yaml allows (10 s) keep these tests short; the code does not care.
settings = LockSettings.model_construct(kind="s3", lease_seconds=a.get("lease", 10))
def stale(name, h):
    print(f"stale {h.pid} {h.command}", flush=True)
if mode == "hold":  # take the lock, say so, keep it until killed
    with hold(where, ["table-ods.user"], command=f"holder {arg}", timeout=a.get("timeout", 0), settings=settings, spark_conf=conf, on_stale=stale):
        print("held", flush=True)
        time.sleep(3600)
elif mode == "guard":  # take it, then check it as a commit would, every 0.1 s, until refused or killed
    with hold(where, ["table-ods.user"], command=f"guard {arg}", timeout=0, settings=settings, spark_conf=conf):
        print("held", flush=True)
        try:
            while True:
                assert_held("the commit to ods.user")
                time.sleep(0.1)
        except LakeError as e:
            print(f"refused: {e} | {e.fix}", flush=True)
    sys.exit(4)
elif mode == "try":  # take it within `arg` seconds, or print the error
    try:
        t0 = time.monotonic()
        with hold(where, ["table-ods.user"], command="trier", timeout=float(arg), settings=settings, spark_conf=conf, on_stale=stale):
            print(f"got after {time.monotonic() - t0:.1f}", flush=True)
    except LakeError as e:
        print(f"refused: {e} | {e.fix}", flush=True)
        sys.exit(3)
else:  # "count": 15 rounds of lock, enter, work, exit, unlock, logged to a shared file
    for _ in range(15):
        with hold(where, ["table-ods.user"], command=f"counter {arg}", timeout=120, settings=settings, spark_conf=conf):
            with open(a["log"], "a") as f:
                f.write(f"enter {arg}\n")
            time.sleep(0.05)
            with open(a["log"], "a") as f:
                f.write(f"exit {arg}\n")
"""


def _start(s3: S3Server | str, where: str, mode: str, arg: str, **more: Any) -> subprocess.Popen[str]:
    """A worker process; `s3` is the server, or the endpoint of a proxy in front of it."""
    conf = (s3 if isinstance(s3, S3Server) else S3Server(s3)).spark_conf()
    spec = {"where": where, "conf": conf, "mode": mode, "arg": arg, **more}
    return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
                            cwd=Path(__file__).resolve().parents[2])


def _run(s3: S3Server | str, where: str, mode: str, arg: str, **more: Any) -> tuple[int, str]:
    p = _start(s3, where, mode, arg, **more)
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
    procs = [_start(s3_server, where, "count", name, log=str(log)) for name in ("A", "B")]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    lines = log.read_text().split("\n")[:-1]
    assert len(lines) == 60
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):  # every enter is followed by its own exit
        assert enter.startswith("enter ") and leave == "exit " + enter.split()[1], lines
    assert {line.split()[1] for line in lines} == {"A", "B"}


def _holder_of(s3: S3Server, bucket: str) -> dict[str, Any]:
    body = s3.client().get_object(Bucket=bucket, Key="wh/_lake/locks/table-ods.user.lock")["Body"].read()
    return dict(json.loads(body))


def _stop(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_paused_holder_whose_lease_was_taken_commits_nothing_more(s3_server: S3Server) -> None:
    """(a) A holder paused (SIGSTOP: a GC pause, a suspended VM) past its lease; another process
    takes the lease; resumed, the first is refused at its next commit and leaves the new
    holder's lease alone."""
    bucket = s3_server.new_bucket()
    where = f"s3a://{bucket}/wh/_lake/locks"
    first = _start(s3_server, where, "guard", "A", lease=3)
    second = None
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "held"
        first.send_signal(signal.SIGSTOP)
        second = _start(s3_server, where, "hold", "B", lease=3, timeout=20)
        assert second.stdout is not None
        lines = [second.stdout.readline().strip() for _ in range(2)]
        assert lines == [f"stale {first.pid} guard A", "held"], lines  # took over the paused holder's lease
        first.send_signal(signal.SIGCONT)
        out, _ = first.communicate(timeout=30)
        assert first.returncode == 4, out
        assert "the commit to ods.user was stopped before committing" in out and "lock table-ods.user" in out, out
        assert "run the command again" in out, out
        assert _holder_of(s3_server, bucket)["pid"] == second.pid  # the first one's release did not delete it
    finally:
        first.send_signal(signal.SIGCONT)
        _stop(first, *([second] if second else []))


def test_a_failed_renewal_is_retried_and_a_contender_honours_the_holders_lease(s3_server: S3Server) -> None:
    """(b) One renewal answered with an error (here an expired session token, as an instance role's
    credentials give for a moment) is retried within the lease instead of ending the renewals;
    (c) a contender configured with a 2 s lease waits for the holder's 9 s lease, not its own.
    The holder's commit check passes throughout; the contender never gets the lock."""
    from tests.fault_proxy import fault_proxy, s3_error

    bucket = s3_server.new_bucket()
    where = f"s3a://{bucket}/wh/_lake/locks"
    with fault_proxy(s3_server.endpoint) as proxy:
        proxy.arm(lambda r: r.method == "PUT" and "if-match" in r.headers, "answer",
                  s3_error("400 Bad Request", "ExpiredToken", "The provided token has expired."))
        holder = _start(proxy.endpoint, where, "guard", "A", lease=9)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            code, out = _run(s3_server, where, "try", "11", lease=2)
            assert code == 3 and f"locked by pid {holder.pid}" in out, out
            assert "lease expires 9 s after its last renewal" in out, out
            assert proxy.injected == [f"answer PUT /{bucket}/wh/_lake/locks/table-ods.user.lock"]
            assert holder.poll() is None, holder.communicate()[0]  # never refused its own commits
            assert _holder_of(s3_server, bucket)["renewals"] >= 3
        finally:
            _stop(holder)


def test_a_lost_answer_to_a_conditional_write_is_recognised_as_our_own(s3_server: S3Server) -> None:
    """(d) The server takes a conditional PUT but its answer is lost; the retry then fails its
    condition against the object this process just wrote. Taking the lock and renewing it both
    read the object back and find their own token: no wait, no "dead holder", no lost lease."""
    from tests.fault_proxy import fault_proxy

    bucket = s3_server.new_bucket()
    where = f"s3a://{bucket}/wh/_lake/locks"
    with fault_proxy(s3_server.endpoint) as proxy:
        proxy.arm(lambda r: r.method == "PUT" and "if-none-match" in r.headers, "drop")
        code, out = _run(proxy.endpoint, where, "try", "5", lease=10)
        assert code == 0 and "stale" not in out and float(out.split("got after ")[1]) < 2, out
        assert len(proxy.injected) == 1, proxy.injected
        proxy.arm(lambda r: r.method == "PUT" and "if-match" in r.headers, "drop")
        holder = _start(proxy.endpoint, where, "guard", "A", lease=3)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            time.sleep(3.5)  # three renewals, the first one's answer lost
            assert len(proxy.injected) == 2 and holder.poll() is None, holder.communicate()[0]
            assert _holder_of(s3_server, bucket)["renewals"] >= 2
            code, out = _run(s3_server, where, "try", "0", lease=3)
            assert code == 3 and f"locked by pid {holder.pid}" in out, out
        finally:
            _stop(holder)


def test_a_writer_that_lost_its_lease_commits_nothing_and_the_next_run_takes_the_batch(s3_server: S3Server, spark: Any, tmp_path: Path) -> None:
    """(a) through the commit path: this process holds the ingest lease, then loses its way to S3
    (every connection refused) and another process takes the lease over. Its ingest micro-batch
    and a plain Hudi write are refused before committing, with an error naming the lock; the
    next run, holding the lease again, ingests the batch."""
    from framework.runtime.location import Location
    from framework.runtime.lock import LockLostError, hold
    from framework.table import hudi
    from models.config import LockSettings
    from tests.fault_proxy import fault_proxy
    from tests.helpers import LakeProject, UsersSource

    bucket = s3_server.new_bucket()
    where = f"s3a://{bucket}/wh/_lake/locks"
    lp = LakeProject(tmp_path / "p", "tables:\n  - {source: shop.users, key: [id]}\n")
    src = UsersSource()
    lp.write_cdc([src.put(1, "sh", 5), src.put(2, "bj", 12)])
    settings = LockSettings.model_construct(kind="s3", lease_seconds=3)
    users = lp.layout.table("ods.users")
    with fault_proxy(s3_server.endpoint) as proxy, \
            hold(Location.parse(where), ["table-ods.user"], command="test", timeout=0, settings=settings,
                 spark_conf=S3Server(proxy.endpoint).spark_conf()):
        proxy.down = True
        other = _start(s3_server, where, "hold", "B", lease=3, timeout=20)
        try:
            assert other.stdout is not None
            assert [other.stdout.readline().split()[0] for _ in range(2)] == ["stale", "held"]
            with pytest.raises(LockLostError) as e:
                lp.ingest(spark)
            assert "no longer safely holds the lock table-ods.user" in str(e.value) and "run the command again" in (e.value.fix or "")
            df = spark.createDataFrame([(1, "x")], "id int, v string")
            with pytest.raises(LockLostError):
                hudi.write(df, tmp_path / "t", hudi.write_options(name="t", key=["id"], ordering=None, partition=None), {})
            assert not hudi.table_exists(tmp_path / "t") and hudi.completed_instants(spark, users) == []
            assert _holder_of(s3_server, bucket)["pid"] == other.pid
        finally:
            proxy.down = False
            _stop(other)
    with hold(Location.parse(where), ["table-ods.user"], command="test", timeout=20, settings=settings, spark_conf=s3_server.spark_conf()):
        lp.ingest(spark)
    assert sorted((r["id"], r["city"], r["score"]) for r in lp.rows(spark, "users")) == [(1, "sh", 5), (2, "bj", 12)]
