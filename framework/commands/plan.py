"""`lake plan`: what each selected model would do and why, from one read of its tables' state.
Writes nothing; starts Spark only when a table of the selection exists (an unbuilt project is
planned without a JVM)."""

from __future__ import annotations

from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.transform.plan import ModelPlan
from framework.transform.runner import Selection, plan


def run_plan(*, project: Project, selection: Selection, incremental: bool) -> list[tuple[ModelPlan, dict[str, int]]]:
    """Each selected model's plan and its upstreams' changed rows, in build order."""
    from framework.table.session import ensure_storage

    ensure_storage(project)  # a remote warehouse: its timelines are read through Spark anyway
    layout = Layout(project.warehouse)
    tables = {u for n in selection.chosen for u in selection.models[n].upstreams} | set(selection.chosen)
    spark = None
    if any(hudi.table_exists(layout.table(t)) for t in tables):
        from framework.table.session import spark_session

        spark = spark_session(project)
    return plan(spark, project, list(selection.chosen), [], incremental, loaded=selection)
