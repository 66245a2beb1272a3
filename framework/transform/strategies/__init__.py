"""Build strategies, one module each, all of one shape: `build(ctx, plan) -> (written, deleted)`.

`full` serves full builds and recomputes of every model; the incremental strategies are chosen
by the model's inferred (or configured) strategy (framework/transform/strategy.py). A new
strategy is a module here, an entry in INCREMENTAL and its inference in strategy.py.
"""

from __future__ import annotations

from typing import Protocol

from framework.transform.commit import Written
from framework.transform.context import BuildContext
from framework.transform.plan import ModelPlan
from framework.transform.strategies import aggregate, full, rescan, restate, rowwise


class Strategy(Protocol):
    def __call__(self, ctx: BuildContext, p: ModelPlan) -> Written: ...


INCREMENTAL: dict[str, Strategy] = {"rowwise": rowwise.build, "aggregate": aggregate.build, "rescan": rescan.build}


def for_plan(p: ModelPlan) -> Strategy:
    """What executes a plan whose mode builds (not noop)."""
    if p.mode in ("full", "recompute"):
        return full.build
    if p.mode == "restate":
        return restate.build
    return INCREMENTAL[p.analysis.strategy]
