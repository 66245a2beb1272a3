"""One command's observers, as lake.yaml configures them, fed by the run records it makes:
OpenLineage events while the run goes, then at its end checkpoint lag, alerts, secrets redacted,
metrics (in long-running processes) and a copy for the scheduler that started the command."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from framework.errors import LakeError
from framework.observe.metrics import Metrics
from framework.observe.redact import Redactor
from framework.project.config import Project
from framework.runtime.paths import Layout
from models.records import Delivery, ModelResult, RunRecord

# A directory a parent `lake schedule` gives its children: each finished run record is also
# written there, so the scheduler's metrics see runs on any warehouse without starting a JVM.
SPOOL_ENV = "LAKE_RECORD_SPOOL"


class Observer:
    """`started(record)` and `finish(record)` around a run, `on_start`/`on_result` around each model."""

    def __init__(self, project: Project, metrics: Metrics | None = None, textfile: Path | None = None) -> None:
        self.project = project
        self.redactor = Redactor(project.secrets)
        self.metrics, self.textfile = metrics, textfile
        self.lineage = None
        self._setup_error: str | None = None
        if project.config.lineage is not None:
            try:
                from framework.observe.lineage_events import LineageEmitter

                self.lineage = LineageEmitter(project, project.config.lineage, self.redactor)
            except Exception as e:  # noqa: BLE001 - no lineage client: said in each record, the run goes on
                self._setup_error = self.redactor.text(f"{type(e).__name__}: {e}")

    def started(self, rec: RunRecord) -> None:
        if self.lineage is not None:
            self.lineage.run_started(rec)

    def on_start(self, rec: RunRecord, then: Callable[[str], None] | None = None) -> Callable[[str], None]:
        def hook(model: str) -> None:
            if self.lineage is not None:
                self.lineage.model_started(rec, model)
            if then is not None:
                then(model)
        return hook

    def on_result(self, rec: RunRecord, then: Callable[[ModelResult], None] | None = None) -> Callable[[ModelResult], None]:
        def hook(result: ModelResult) -> None:
            if self.lineage is not None:
                self.lineage.model_finished(rec, result)
            if then is not None:
                then(result)
        return hook

    def finish(self, rec: RunRecord) -> None:
        """Everything a finished run is owed; never raises (failures go into `deliveries`)."""
        if self._setup_error:
            self._failed(rec, "lineage", "setup", self._setup_error)
        built = [r.model for r in rec.models if r.mode not in ("failed", "skipped")]
        with self._guard(rec, "lineage", "checkpoint lag"):
            if built:
                from framework.observe.lag import checkpoint_lag

                rec.checkpoint_lag = checkpoint_lag(Layout(self.project.warehouse), built)
        if self.lineage is not None:
            with self._guard(rec, "lineage", rec.command):
                self.lineage.run_finished(rec)
        alerts = self.project.config.alerts
        if alerts is not None:
            with self._guard(rec, "alert", "incidents"):
                from framework.observe.alerts import process

                process(self.project, alerts, rec, self.redactor)
        self.redactor.record(rec)
        self.count(rec)
        spool = os.environ.get(SPOOL_ENV)
        if spool:
            with contextlib.suppress(OSError):
                Path(spool).mkdir(parents=True, exist_ok=True)
                (Path(spool) / f"{rec.run_id}.json.tmp").write_text(rec.model_dump_json())
                (Path(spool) / f"{rec.run_id}.json.tmp").rename(Path(spool) / f"{rec.run_id}.json")

    def count(self, rec: RunRecord) -> None:
        """Metrics and the textfile, in a process that keeps them."""
        if self.metrics is not None:
            self.metrics.observe(rec)
            if self.textfile is not None:
                with contextlib.suppress(OSError):
                    self.metrics.write_textfile(self.textfile)

    @contextlib.contextmanager
    def _guard(self, rec: RunRecord, channel: str, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as e:  # noqa: BLE001 - observing a run must never fail it
            self._failed(rec, channel, what, self.redactor.text(f"{type(e).__name__}: {e}"))

    @staticmethod
    def _failed(rec: RunRecord, channel: str, what: str, error: str) -> None:
        rec.deliveries.append(Delivery(channel=channel, target="lake", what=what, ok=False,  # type: ignore[arg-type]
                                       error=error[:500], at=datetime.now(timezone.utc)))


@contextlib.contextmanager
def exposing(project: Project, say: Callable[[str], None]) -> Iterator[Observer]:
    """An observer that also keeps metrics, served on `metrics.port` and written to
    `metrics.textfile` as lake.yaml says, for the life of a long-running process."""
    cfg = project.config.metrics
    if cfg is None:
        yield Observer(project)
        return
    metrics = Metrics()
    textfile = None
    if cfg.textfile is not None:
        textfile = Path(cfg.textfile) if Path(cfg.textfile).is_absolute() else project.root / cfg.textfile
    server = None
    if cfg.port is not None:
        try:
            server, port = metrics.serve(cfg.host, cfg.port)
        except OSError as e:
            raise LakeError(f"cannot serve metrics on {cfg.host}:{cfg.port}: {e.strerror or e}",
                            fix="another process has that port: set another `metrics.port` in lake.yaml (0 picks a free one)") from None
        say(f"metrics: http://{cfg.host}:{port}/metrics")
    try:
        if textfile is not None:
            metrics.write_textfile(textfile)  # the file exists from the start: node_exporter sees lake is up
        yield Observer(project, metrics, textfile)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
