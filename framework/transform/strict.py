"""`incremental: strict` (Databricks' REFRESH POLICY INCREMENTAL STRICT): a model that must never
be rebuilt in full behind its owner's back — it is large, or downstream consumers read its change
feed.

Planning (framework/transform/plan.py) plans such a model incrementally in every build, also
one without `--incremental` (as dbt's `full_refresh: false` ignores `--full-refresh`), and
never recomputes it for its upstreams' size (`recompute_below_mib`). When lake would still fall
back to a full build or a recompute — the model changed, its checkpoint was cleaned or an
upstream rebuilt, its strategy cannot run incrementally — the plan is refused: `lake plan` shows
it, and `lake build` fails the model with the reason and the command that allows it once. A
model's first build (no table yet) is never refused: there is nothing to keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from framework.transform.loader import Model


def is_strict(m: Model) -> bool:
    return m.config.incremental == "strict"


def refusal(m: Model, mode: str, reason: str, first: bool) -> str | None:
    """Why a strict model's plan (`mode`, `reason`) is refused, or None. `first`: its table has
    no checkpoint yet."""
    if first or mode not in ("full", "recompute"):
        return None
    what = "a full build" if mode == "full" else "a recompute of every row"
    return f"{m.name} is `incremental: strict` and this build would fall back to {what}: {reason}"


def allow_once(m: Model) -> str:
    """The fix a refusal names: the command that allows the fall back once, and the setting."""
    return (f"allow it once: lake build {m.name} --allow-full (or remove `incremental: strict` from "
            f"layers/{m.layer}/{m.stem}.yaml)")
