"""Helpers shared by the benchmark scripts: machine description, CPU accounting from /proc,
nested step timers, and rewriting one script's section of BENCHMARKS.md."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = """\
# Benchmarks

Figures here come from single runs on a shared, noisy 2-core machine (another engineer's jobs may
run at the same time). Read them as ratios between measurements taken in the same run and the same
SparkSession (for example lake's ODS ingest against a plain Spark JSON -> Parquet write of the same
files), not as absolute throughput. Each section is rewritten by the script named in its heading.
"""


# --------------------------------------------------------------------------- timing of the engine's steps
class Phases:
    """Wall time of named steps (inclusive and exclusive of nested steps), plus their intervals
    so that Spark jobs from the event log can be attributed to the step that submitted them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stack: list[list[Any]] = []
        self.incl: dict[str, float] = defaultdict(float)
        self.excl: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.order: list[str] = []
        self.intervals: list[tuple[float, float, int, str]] = []  # (start, end, depth, name), epoch s

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with self.lock:
            frame: list[Any] = [name, 0.0]
            depth = len(self.stack)
            self.stack.append(frame)
            if name not in self.order:
                self.order.append(name)
        wall0, t0 = time.time(), time.perf_counter()
        try:
            yield
        finally:
            el = time.perf_counter() - t0
            with self.lock:
                self.stack.remove(frame)
                self.incl[name] += el
                self.excl[name] += el - frame[1]
                self.calls[name] += 1
                if self.stack:
                    self.stack[-1][1] += el
                self.intervals.append((wall0, time.time(), depth, name))

    def step_of(self, epoch_s: float) -> str:
        best: tuple[int, str] | None = None
        for start, end, depth, name in self.intervals:
            if start <= epoch_s <= end and (best is None or depth > best[0]):
                best = (depth, name)
        return best[1] if best else "(outside any step)"


# --------------------------------------------------------------------------- Spark event log
@dataclass
class JobInfo:
    job_id: int
    submitted: int
    completed: int = 0
    description: str = ""
    stage_ids: list[int] = field(default_factory=list)


@dataclass
class StageInfo:
    stage_id: int
    name: str
    tasks: int
    submitted: int
    completed: int
    job: int = -1


def read_event_log(log_dir: Path) -> tuple[list[JobInfo], list[StageInfo]]:
    jobs: dict[int, JobInfo] = {}
    stages: list[StageInfo] = []
    stage_job: dict[int, int] = {}
    for f in sorted(log_dir.iterdir()):
        with f.open() as fh:
            for line in fh:
                ev = json.loads(line)
                kind = ev.get("Event")
                if kind == "SparkListenerJobStart":
                    props = ev.get("Properties") or {}
                    desc = props.get("spark.job.description") or props.get("callSite.short") or ""
                    j = JobInfo(ev["Job ID"], ev["Submission Time"], description=desc, stage_ids=list(ev.get("Stage IDs", [])))
                    jobs[j.job_id] = j
                    for sid in j.stage_ids:
                        stage_job[sid] = j.job_id
                elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
                    jobs[ev["Job ID"]].completed = ev["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    s = ev["Stage Info"]
                    if "Submission Time" in s and "Completion Time" in s:
                        stages.append(StageInfo(s["Stage ID"], s["Stage Name"], s["Number of Tasks"], s["Submission Time"], s["Completion Time"]))
    for s in stages:
        s.job = stage_job.get(s.stage_id, -1)
    return sorted(jobs.values(), key=lambda j: j.submitted), stages


# --------------------------------------------------------------------------- machine
def machine_info() -> dict[str, str]:
    import pyspark

    from framework.runtime.jars import HUDI_BUNDLE

    def first(path: str, key: str) -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    mem_kb = first("/proc/meminfo", "MemTotal").split()[0]
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        java = "?"
    return {
        "cores (nproc)": str(len(os.sched_getaffinity(0))),
        "RAM": f"{int(mem_kb) / 1024**2:.1f} GiB" if mem_kb.isdigit() else "?",
        "CPU": first("/proc/cpuinfo", "model name"),
        "Python": platform.python_version(),
        "Java": java,
        "pyspark": pyspark.__version__,
        "Hudi bundle": HUDI_BUNDLE,
        "driver memory": os.environ.get("LAKE_DRIVER_MEMORY", "4g") + " (LAKE_DRIVER_MEMORY)",
    }


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (ppid, comm, utime + stime in clock ticks) of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        rparen = stat.rfind(")")
        rest = stat[rparen + 2 :].split()
        out[int(d.name)] = (int(rest[1]), stat[stat.find("(") + 1 : rparen], int(rest[11]) + int(rest[12]))
    return out


def descendants(table: dict[int, tuple[int, str, int]]) -> list[int]:
    """This process and all its descendants (the Spark driver JVM among them)."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        children[ppid].append(pid)
    out, todo = [], [os.getpid()]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def jvm_pids() -> list[int]:
    table = _proc_table()
    return [p for p in descendants(table) if table[p][1] == "java"]


@dataclass
class CpuMark:
    at: float
    busy: int  # whole machine, clock ticks
    ours: int  # this process tree, clock ticks

    @staticmethod
    def now() -> CpuMark:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        table = _proc_table()
        ours = sum(table[p][2] for p in descendants(table) if p in table)
        return CpuMark(time.perf_counter(), user + nice + system + irq + softirq + steal, ours)

    def cores_since(self, start: CpuMark) -> tuple[float, float]:
        """Average cores used by this process tree and by everything else between two marks."""
        hz = os.sysconf("SC_CLK_TCK")
        dt = max(self.at - start.at, 1e-9)
        ours = (self.ours - start.ours) / hz / dt
        others = max(0.0, (self.busy - start.busy) / hz / dt - ours)
        return ours, others


def vm_hwm_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def jvm_peak_rss() -> float | None:
    vals = [v for v in (vm_hwm_mib(p) for p in jvm_pids()) if v is not None]
    return max(vals) if vals else None


def write_markdown(path: Path, section: str) -> None:
    """Replace the section of `path` whose heading is the first line of `section` (or append it)."""
    heading = section.split("\n", 1)[0]
    text = path.read_text() if path.exists() else ""
    if not text.strip():
        text = HEADER
    pattern = re.compile(r"^" + re.escape(heading) + r"\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section.rstrip("\n") + "\n\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")
