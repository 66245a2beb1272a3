"""What `lake build` may do beyond its plan: let `incremental: strict` models fall back to a full
build or a recompute (`--allow-full`), restate a range of partitions (`--restate`), and apply a
change that only adds columns from now on (`--forward-only`); and say why it was asked for
(`note`: `lake verify --repair`'s reason, recorded in each commit)."""

from __future__ import annotations

from dataclasses import dataclass

from models.restatement import RestateRange


@dataclass(frozen=True)
class BuildOptions:
    allow_full: bool = False  # `incremental: strict` models may fall back to a full build, once
    restate: RestateRange | None = None  # partitions of partitioned models to recompute (strategies/restate.py)
    forward_only: bool = False  # a model whose query only added columns builds them from now on (plan.forward_change)
    note: str | None = None  # recorded in the commit's metadata (ModelCheckpoint.note) and the result's reason
