"""What `lake build` may do beyond its plan: let `incremental: strict` models fall back to a full
build or a recompute (`--allow-full`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuildOptions:
    allow_full: bool = False  # `incremental: strict` models may fall back to a full build, once
