"""Great Expectations Data Docs, built from stored validation results (no Spark).

GE 1.x renders Data Docs from its validation-results store. An ephemeral context with a
filesystem Data Docs site at `<report dir>/gx` is enough: the stored GE JSON is loaded
back into that context's (in-memory) store and rendered, so evaluation never writes GE state and
`lake report` can run long after the build, in another process.

GE's renderer escapes what it formats through its string templates (expectation arguments,
exception messages), but puts the validated data into the page raw: unexpected values and their
counts, sample rows, observed values, and exception tracebacks (reproduced with GE 1.24: a
`<script>` in a row value ran in the reader's browser). So a copy of each result with those
strings HTML-escaped is what GE renders (`_escaped`); the stored results stay as they were.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from models.quality_result import ModelQuality

SITE = "lake"


def site_dir(out: Path) -> Path:
    """The Data Docs site inside a report directory."""
    return out / "gx"


def build_data_docs(out: Path, records: list[ModelQuality]) -> dict[tuple[str, str], Path]:
    """Render every GE suite result of `records`; returns (model, suite) -> its HTML page.
    The site's index (`site_dir/index.html`) is rewritten to list exactly `records` (GE builds it
    from the store, which here holds only what is passed), so pass every run to be listed."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.core.expectation_validation_result import (
        ExpectationSuiteValidationResultSchema,
    )
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    base = site_dir(out)
    ctx = gx.get_context(mode="ephemeral")
    site: Any = {
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(base)},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "show_how_to_buttons": False,
    }
    ctx.add_data_docs_site(SITE, site)
    schema = ExpectationSuiteValidationResultSchema()
    pages: dict[tuple[str, str], Path] = {}
    keys = []
    for record in records:
        run = RunIdentifier(run_name=record.run_id, run_time=record.evaluated_at)
        for ge in record.ge_results:
            result = schema.load(_escaped(ge))
            suite = result.suite_name
            key = ValidationResultIdentifier(ExpectationSuiteIdentifier(name=suite), run, "batch")
            ctx.validation_results_store.set(key, result)
            keys.append(key)
            # The site's layout: validations/<suite parts>/<run name>/<run time>/<batch>.html
            pages[(record.model, suite)] = base.joinpath(
                "validations", *suite.split("."), record.run_id, run.run_time.strftime("%Y%m%dT%H%M%S.%fZ"), "batch.html"
            )
    if keys:
        ctx.build_data_docs(site_names=[SITE], resource_identifiers=keys)
    return pages


def _escaped(ge: dict[str, Any]) -> dict[str, Any]:
    """A copy of a suite result whose data-bearing parts GE renders raw are HTML-escaped: each
    expectation's `result` (keys too: sample rows are keyed by column name, and GE looks those up
    by the equally escaped `unexpected_index_column_names`) and exception tracebacks."""
    out = dict(ge)
    out["results"] = []
    for r in ge.get("results") or []:
        r = dict(r)
        if isinstance(r.get("result"), dict):
            r["result"] = _escape_all(r["result"])
        info = r.get("exception_info")
        if isinstance(info, dict):  # flat, or keyed by the metric that raised
            flat = "exception_traceback" in info
            r["exception_info"] = _escape_traceback(info) if flat else {
                k: _escape_traceback(v) if isinstance(v, dict) else v for k, v in info.items()}
        out["results"].append(r)
    return out


def _escape_all(v: Any) -> Any:
    if isinstance(v, str):
        return html.escape(v)
    if isinstance(v, dict):
        return {(html.escape(k) if isinstance(k, str) else k): _escape_all(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_escape_all(x) for x in v]
    return v


def _escape_traceback(info: dict[str, Any]) -> dict[str, Any]:
    tb = info.get("exception_traceback")
    return {**info, "exception_traceback": html.escape(tb)} if isinstance(tb, str) else info
