"""Great Expectations Data Docs, built from stored validation results (no Spark).

GE 1.x renders Data Docs from its validation-results store. An ephemeral context with a
filesystem Data Docs site at `<report dir>/gx` is enough: the stored GE JSON is loaded
back into that context's (in-memory) store and rendered, so evaluation never writes GE state and
`lake report` can run long after the build, in another process.
"""

from __future__ import annotations

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
            result = schema.load(ge)
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
