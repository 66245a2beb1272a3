"""OpenLineage run events (START, then COMPLETE or FAIL) for every ingest and build, through the
official client (`openlineage-python`) to the configured transport (http or file).

Each run record is one OpenLineage run of the job `<command>` (ingest, build, run); each model a
build reaches is a run of the job `<layer>.<name>` whose parent is that run. Datasets are the
Hudi tables by location (OpenLineage's naming: namespace `s3://bucket` or `file`, name the path)
with their SQL name as a symlink; a model's output carries the column lineage lake computes
(framework/transform/lineage.py: its direct upstream columns) and its row count. The ingest's
outputs are the ODS tables it wrote, with the rows it wrote (deletes included); its input is the
CDC source. A transport that fails does not stop the run: the run record says so (`deliveries`).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from framework import __version__
from framework.observe.redact import Redactor
from framework.project.config import Project
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from models.ops import FileLineage, HttpLineage, LineageConfig
from models.records import Delivery, ModelResult, RunRecord

PRODUCER = f"urn:lake:{__version__}"


def run_uuid(project: Project, run_id: str, job: str = "") -> str:
    """A stable OpenLineage run id (a UUID) for a lake run, or a model's run within it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"lake:{project.config.name}:{run_id}:{job}"))


def dataset_name(where: Location) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a location: `s3://bucket` + key, or `file` + path."""
    if where.is_local:
        return "file", where.path
    scheme = "s3" if where.scheme in ("s3a", "s3n") else str(where.scheme)
    return f"{scheme}://{where.authority}", where.key


def make_client(cfg: LineageConfig, root: Path) -> Any:
    from openlineage.client import OpenLineageClient

    t = cfg.transport
    if isinstance(t, HttpLineage):
        from openlineage.client.transport.http import (
            ApiKeyTokenProvider,
            HttpConfig,
            HttpTransport,
            TokenProvider,
        )

        auth = ApiKeyTokenProvider({"api_key": t.api_key}) if t.api_key else TokenProvider({})
        retry = {"total": 1, "read": 1, "connect": 1, "backoff_factor": 0.2, "status_forcelist": [500, 502, 503, 504],
                 "allowed_methods": ["HEAD", "POST"]}
        return OpenLineageClient(transport=HttpTransport(HttpConfig(url=t.url, endpoint=t.endpoint, timeout=t.timeout_seconds,
                                                                    auth=auth, retry=retry)))
    assert isinstance(t, FileLineage)
    from openlineage.client.transport.file import FileConfig, FileTransport

    path = Path(t.path) if Path(t.path).is_absolute() else root / t.path
    path.parent.mkdir(parents=True, exist_ok=True)
    return OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(path), append=True)))


class LineageEmitter:
    """Emits the events of one command's runs; `client` is an OpenLineageClient."""

    def __init__(self, project: Project, cfg: LineageConfig, redactor: Redactor, client: Any | None = None) -> None:
        self.project, self.redactor = project, redactor
        self.namespace = cfg.namespace or project.config.name
        self.layout = Layout(project.warehouse)
        self.client = client or make_client(cfg, project.root)
        self.target = redactor.text(f"{cfg.transport.type} {getattr(cfg.transport, 'url', None) or getattr(cfg.transport, 'path', '')}")
        self._models: Any = None
        self._tracer: Any = None

    # -- the events ------------------------------------------------------------------------
    def run_started(self, rec: RunRecord) -> None:
        self._emit(rec, "START", rec.command, run_uuid(self.project, rec.run_id), facets=self._run_facets(rec, None), what="START")

    def run_finished(self, rec: RunRecord) -> None:
        state = "COMPLETE" if rec.status == "ok" else "FAIL"
        ins, outs = self._ingest_datasets(rec)
        self._emit(rec, state, rec.command, run_uuid(self.project, rec.run_id), facets=self._run_facets(rec, rec.error if state == "FAIL" else None),
                   inputs=ins, outputs=outs, what=state)

    def model_started(self, rec: RunRecord, model: str) -> None:
        self._emit(rec, "START", model, run_uuid(self.project, rec.run_id, model), facets=self._child_facets(rec), inputs=self._inputs(model),
                   outputs=[self._table(model, None)], what=f"START {model}")

    def model_finished(self, rec: RunRecord, r: ModelResult) -> None:
        if r.mode == "skipped":
            return  # never started: no run
        state = "FAIL" if r.mode == "failed" else "COMPLETE"
        facets = self._child_facets(rec)
        if state == "FAIL":
            facets["errorMessage"] = self._error(r.error or r.reason)
        out = self._table(r.model, r.rows_written if state == "COMPLETE" else None, self._column_lineage(r.model))
        self._emit(rec, state, r.model, run_uuid(self.project, rec.run_id, r.model), facets=facets, inputs=self._inputs(r.model),
                   outputs=[out], what=f"{state} {r.model}")

    # -- pieces ----------------------------------------------------------------------------
    def _emit(self, rec: RunRecord, state: str, job: str, run_id: str, *, facets: dict[str, Any], what: str,
              inputs: list[Any] | None = None, outputs: list[Any] | None = None) -> None:
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import job_type_job

        jt = job_type_job.JobTypeJobFacet(processingType="BATCH", integration="LAKE", jobType="MODEL" if "." in job else "JOB")
        event = RunEvent(eventType=RunState[state], eventTime=datetime.now(timezone.utc).isoformat(), producer=PRODUCER,
                         run=Run(runId=run_id, facets=facets), job=Job(namespace=self.namespace, name=job, facets={"jobType": jt}),
                         inputs=inputs or [], outputs=outputs or [])
        try:
            self.client.emit(event)
        except Exception as e:  # noqa: BLE001 - lineage that cannot go out must not stop the run
            rec.deliveries.append(Delivery(channel="lineage", target=self.target, what=f"{what} ({job})", ok=False,
                                           error=self.redactor.text(f"{type(e).__name__}: {e}")[:500], at=datetime.now(timezone.utc)))

    def _run_facets(self, rec: RunRecord, error: str | None) -> dict[str, Any]:
        from openlineage.client.facet_v2 import processing_engine_run

        out: dict[str, Any] = {"processing_engine": processing_engine_run.ProcessingEngineRunFacet(version=__version__, name="lake")}
        if error:
            out["errorMessage"] = self._error(error)
        return out

    def _child_facets(self, rec: RunRecord) -> dict[str, Any]:
        from openlineage.client.facet_v2 import parent_run

        return {"parent": parent_run.ParentRunFacet(run=parent_run.Run(runId=run_uuid(self.project, rec.run_id)),
                                                    job=parent_run.Job(namespace=self.namespace, name=rec.command))}

    def _error(self, text: str) -> Any:
        from openlineage.client.facet_v2 import error_message_run

        return error_message_run.ErrorMessageRunFacet(message=self.redactor.text(text)[:2000], programmingLanguage="python")

    def _table(self, name: str, rows: int | None, lineage: Any = None, output: bool = True) -> Any:
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import output_statistics_output_dataset, symlinks_dataset

        ns, path = dataset_name(self.layout.table(name))
        facets: dict[str, Any] = {"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[
            symlinks_dataset.Identifier(namespace=f"lake://{self.project.config.name}", name=name, type="TABLE")])}
        if lineage is not None:
            facets["columnLineage"] = lineage
        if not output:
            return InputDataset(namespace=ns, name=path, facets=facets)
        stats: dict[str, Any] = {} if rows is None else {"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=rows)}
        return OutputDataset(namespace=ns, name=path, facets=facets, outputFacets=stats)

    def _inputs(self, model: str) -> list[Any]:
        m = self._model(model)
        return [self._table(u, None, output=False) for u in (m.upstreams if m is not None else [])]

    def _ingest_datasets(self, rec: RunRecord) -> tuple[list[Any], list[Any]]:
        if rec.ingest is None:
            return [], []
        from openlineage.client.event_v2 import InputDataset

        src = self.project.config.ods.source
        if src.kind == "files":
            ns, path = dataset_name(Location.parse(src.path, self.project.root))
            ins = [InputDataset(namespace=ns, name=path)]
        else:
            server = src.bootstrap_servers.split(",")[0].strip()
            ins = [InputDataset(namespace=f"kafka://{server}", name=t) for t in (src.topics or [src.topic_pattern or ""])]
        # `totals()` is keyed by the short table name; each result carries the qualified one (ods.users).
        outs = [self._table(t.table, t.upserts + t.deletes) for _name, t in sorted(rec.ingest.totals().items())
                if t.status in ("ok", "already_committed")]
        return ins, outs

    def _model(self, name: str) -> Any:
        if self._models is None:
            from framework.transform.loader import load_models

            self._models = load_models(self.project)
        return self._models.get(name)

    def _column_lineage(self, model: str) -> Any:
        """The columnLineage facet of a model's table: each output column's direct upstream
        columns (IDENTITY, TRANSFORMATION or AGGREGATION; GROUP BY keys as INDIRECT)."""
        from framework.observe.columns import column_lineage

        if self._tracer is None:
            from framework.transform.lineage import Tracer

            self._model(model)  # the project's models, loaded once
            self._tracer = Tracer.for_project(self.project, self._models)
        try:
            return column_lineage(self._tracer, model, self._dataset_of)
        except Exception:  # noqa: BLE001 - column lineage is what lake can trace; the event goes out without it
            return None

    def _dataset_of(self, table: str) -> tuple[str, str]:
        return dataset_name(self.layout.table(table))

