"""`lake plan`: what each selected model would do and why, from one read of its tables' state.
Writes nothing and never fails on a valid project: a model whose upstream has no data yet is
planned as the full build it waits to run ("full build; waits for ods.customers"). Reads the
timelines from their files: no JVM on a local warehouse, built or not."""

from __future__ import annotations

from framework.project.config import Project
from framework.transform.plan import ModelPlan
from framework.transform.runner import Selection, plan


def run_plan(*, project: Project, selection: Selection, incremental: bool, allow_full: bool = False,
             forward_only: bool = False) -> list[tuple[ModelPlan, dict[str, int]]]:
    """Each selected model's plan and its upstreams' changed rows, in build order; `allow_full`:
    as `lake build --allow-full` plans (strict models may fall back); `forward_only`: as `lake
    build --forward-only` plans (a query that only added columns builds them from now on)."""
    from framework.table.session import ensure_external_storage, ensure_storage

    ensure_storage(project)  # a remote warehouse: its timelines are read through Hadoop's file system
    ensure_external_storage(project, {u for n in selection.chosen for u in selection.models[n].upstreams})
    return plan(None, project, list(selection.chosen), [], incremental, loaded=selection, lenient=True, allow_full=allow_full,
                forward_only=forward_only)
