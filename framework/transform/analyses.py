"""Every model's strategy analysis, with the keys of their upstream tables (no Spark)."""

from __future__ import annotations

from collections.abc import Mapping

from framework.errors import LakeError
from framework.transform.loader import Model
from framework.transform.strategy import Analysis, analyze


class Analyses:
    """Analyses of a project's models, made once each. `ods_keys`: the key of every ODS table
    (from its YAML, or, for one declared without `key:`, the key its Hudi table was created with)."""

    def __init__(self, models: Mapping[str, Model], ods_keys: Mapping[str, tuple[str, ...]]) -> None:
        self.models = models
        self.ods_keys = ods_keys
        self._done: dict[str, Analysis] = {}

    def key_of(self, name: str) -> tuple[str, ...] | None:
        if name in self.ods_keys:
            return self.ods_keys[name]
        return self.of(self.models[name]).key if name in self.models else None

    def of(self, m: Model) -> Analysis:
        if m.name not in self._done:
            try:
                self._done[m.name] = analyze_model(m, self.key_of)
            except ValueError as e:
                raise LakeError(f"{m.rel}: {e}", fix=f"change `strategy:` in layers/{m.layer}/{m.stem}.yaml") from e
        return self._done[m.name]


def analyze_model(m: Model, key_of: object) -> Analysis:
    """The strategy of model `m` given the keys of its upstreams; ValueError for an impossible
    `strategy:` override of a SQL model."""
    if m.kind == "python":
        key = tuple(m.config.key) if m.config.key else None
        if m.config.strategy in (None, "rescan") and key:
            return Analysis("rescan", "Python model with a key: recompute the output keys the changed rows reach", m.upstreams, key)
        return Analysis("full", "Python model without `key:`: full rebuild" if not key else "strategy: full in the model's YAML", m.upstreams, key)
    assert m.sql is not None
    a = analyze(m.sql, key_of, m.config.key, m.config.strategy)  # type: ignore[arg-type]
    if a.strategy == "full" and a.key is None and m.config.partition_by and "no key to scope" in a.reason and m.config.strategy is None:
        reason = a.reason.split(" and no key")[0] + f": recompute the `{m.config.partition_by}` partitions the changed rows reach"
        a = Analysis("rescan", reason, a.upstreams, None)
    return a
