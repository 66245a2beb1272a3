"""A model's strategy analysis, without Spark: the evaluator's (framework/transform/evaluate.py, `Analyses`) and
the loader's, which reports an impossible `strategy:` override as a config error before Spark
starts whenever the keys it depends on are known from the YAML files alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import yaml

from framework.errors import ConfigIssue, LakeError
from framework.transform import seed
from framework.transform.strategy import Analysis, analyze

if TYPE_CHECKING:
    from framework.project.config import Project
    from framework.transform.loader import Model

KeyOf = Callable[[str], "tuple[str, ...] | None"]


def analyze_model(m: Model, upstream_key: KeyOf) -> Analysis:
    """The strategy of model `m` given the keys of its upstreams; ValueError for an impossible
    `strategy:` override of a SQL model."""
    if m.kind == "seed":
        return seed.analysis(m)
    if m.kind == "python":
        key = tuple(m.config.key) if m.config.key else None
        if m.config.strategy in (None, "rescan") and key:
            return Analysis("rescan", "Python model with a key: recompute the output keys the changed rows reach", m.upstreams, key)
        return Analysis("full", "Python model without `key:`: full rebuild" if not key else "strategy: full in the model's YAML", m.upstreams, key)
    assert m.sql is not None
    a = analyze(m.sql, upstream_key, m.config.key, m.config.strategy)
    if a.strategy == "full" and a.key is None and m.config.partition_by and "no key to scope" in a.reason and m.config.strategy is None:
        reason = a.reason.split(" and no key")[0] + f": recompute the `{m.config.partition_by}` partitions the changed rows reach"
        a = Analysis("rescan", reason, a.upstreams, None)
    return a


def declared_keys(project: Project) -> dict[str, tuple[str, ...]]:
    """The keys the YAML files declare for tables models read that are not models: ODS tables'
    and external tables' `key:` (a table declared without one is left out)."""
    return {**{n: k for t in project.ods_tables if t.key for n, k in t.readable().items()},
            **{n: tuple(e.config.key) for n, e in project.externals.items() if e.config.key}}


def history_key(models: Mapping[str, Model], name: str, key_of: Callable[[Model], tuple[str, ...] | None]) -> tuple[str, ...] | None:
    """The key of a model's history table `name` (`<model>_history`): the model's key and `_seq`;
    None for any other name, or a model without a key."""
    base = models.get(name.removesuffix("_history"))
    if base is None or base.history_name != name:
        return None
    key = key_of(base)
    return (*key, "_seq") if key else None


class _Unknown(Exception):
    """A key that only the table itself can tell (an ODS table declared without `key:`)."""


def strategy_issues(project: Project, models: dict[str, Model]) -> list[ConfigIssue]:
    """Impossible `strategy:` overrides, found without Spark. A model whose analysis needs the
    key of an ODS table declared without `key:` (Kafka: the key is in the table) is left to the
    build, which reports the same problem."""
    ods_keys = {n: k or None for t in project.ods_tables for n, k in t.readable().items()}
    external_keys = {n: tuple(e.config.key) if e.config.key else None for n, e in project.externals.items()}
    done: dict[str, Analysis | None] = {}

    def key_of(name: str) -> tuple[str, ...] | None:
        if name in ods_keys:
            key = ods_keys[name]
            if key is None:
                raise _Unknown(name)
            return key
        if name in external_keys:
            return external_keys[name]
        if name not in models:
            return history_key(models, name, lambda m: key_of(m.name))
        a = analysis(models[name])
        if a is None:  # its own problem is reported for it
            raise _Unknown(name)
        return a.key

    def analysis(m: Model) -> Analysis | None:
        if m.name not in done:
            done[m.name] = None  # a cycle is dag.py's error to report
            with contextlib.suppress(ValueError, _Unknown):
                done[m.name] = analyze_model(m, key_of)
        return done[m.name]

    issues = []
    for m in models.values():
        s = m.config.strategy
        if s is None:
            continue
        rel = f"layers/{m.layer}/{m.stem}.yaml"
        line = _line_of(m, "strategy")
        if m.kind == "python":
            if s in ("rowwise", "aggregate"):
                issues.append(ConfigIssue(rel, line, "strategy", f"strategy: {s} is not possible for a Python model: lake cannot read its code", "use `strategy: rescan` with a `key:`, or `strategy: full`"))
            elif s == "rescan" and not m.config.key:
                issues.append(ConfigIssue(rel, line, "strategy", "strategy: rescan needs a key", "add `key: [...]` to the model's YAML, or use `strategy: full`"))
            continue
        try:
            analyze_model(m, key_of)
        except _Unknown:
            continue
        except ValueError as e:
            issues.append(ConfigIssue(rel, line, "strategy", str(e), f"change or remove `strategy:` in {rel}"))
    return issues


def _line_of(m: Model, key: str) -> int | None:
    """The line of a top-level key in the model's YAML."""
    if m.config_path is None:
        return None
    try:
        node = yaml.compose(m.config_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if k.value == key:
                return int(k.start_mark.line) + 1
    return None


class Analyses:
    """Analyses of a project's models, made once each. `ods_keys`: the key of every ODS table
    (from its YAML, or, for one declared without `key:`, the key its Hudi table was created with),
    and of each external table that declares one."""

    def __init__(self, models: Mapping[str, Model], ods_keys: Mapping[str, tuple[str, ...]]) -> None:
        self.models = models
        self.ods_keys = ods_keys
        self._done: dict[str, Analysis] = {}

    def key_of(self, name: str) -> tuple[str, ...] | None:
        if name in self.ods_keys:
            return self.ods_keys[name]
        if name in self.models:
            return self.of(self.models[name]).key
        return history_key(self.models, name, lambda m: self.of(m).key)

    def of(self, m: Model) -> Analysis:
        if m.name not in self._done:
            try:
                self._done[m.name] = analyze_model(m, self.key_of)
            except ValueError as e:
                raise LakeError(f"{m.rel}: {e}", fix=f"change `strategy:` in layers/{m.layer}/{m.stem}.yaml") from e
        return self._done[m.name]
