"""Finding the unit tests of the selected models and checking them against the project, before
Spark starts: every problem (an upstream the model does not read, a column that does not exist,
a value that is not of its declared type, an event that cannot apply) is a config error naming
the file, the line, the field and the fix.

Tests live under `tests:` in a model's YAML, or under `unit_tests:` (each naming its `model:`) in
the project's `tests/*.yaml`. Each becomes a :class:`Case`: typed inputs, their final rows after
the change events, the commits that bring those changes, and the expected rows.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from framework.errors import ConfigError, ConfigIssue
from framework.modeltest.events import Round
from framework.modeltest.inputs import Input, resolve_inputs
from framework.modeltest.refs import Where, compose
from framework.modeltest.rows import Row, RowsError, read_rows
from framework.project.config import Project, load_model
from framework.transform.analysis import Analyses, declared_keys
from framework.transform.lineage import Tracer
from framework.transform.loader import Model
from models.unit_test import UnitTest, UnitTestFile


@dataclass(frozen=True)
class Case:
    """One unit test, resolved."""

    model: Model
    name: str
    file: str
    line: int | None
    inputs: Mapping[str, Input]
    final: Mapping[str, tuple[Row, ...]]  # each input's rows after the change events
    rounds: tuple[Round, ...]  # the commits of the change events (none: not incremental)
    expect: tuple[Row, ...]
    expect_columns: tuple[str, ...]
    ordered: bool
    key: tuple[str, ...] | None  # the model's key: pairs a changed row's expected and actual lines

    @property
    def incremental(self) -> bool:
        return bool(self.rounds)


@dataclass(frozen=True)
class _Spec:
    model: str
    test: UnitTest
    where: Where
    base: Path  # the folder of the YAML file (file: paths are relative to it)


def discover(project: Project, models: Mapping[str, Model], names: Sequence[str]) -> list[Case]:
    """The tests of the models `names`, in that order; ConfigError with every problem found."""
    issues: list[ConfigIssue] = []
    specs = _sidecar_specs(project, models, names) + _project_specs(project, models, issues)
    analyses = Analyses(models, declared_keys(project))
    tracer = Tracer(project, dict(models))
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    order = {n: i for i, n in enumerate(names)}
    for spec in sorted((s for s in specs if s.model in order), key=lambda s: order[s.model]):
        if (spec.model, spec.test.name) in seen:
            issues.append(spec.where.issue(("name",), f"{spec.model} has two tests named {spec.test.name!r}", "give each test of a model its own name"))
            continue
        seen.add((spec.model, spec.test.name))
        found = _resolve(project, models[spec.model], spec, analyses, tracer)
        if isinstance(found, Case):
            cases.append(found)
        else:
            issues += found
    if issues:
        raise ConfigError(issues)
    return cases


def _sidecar_specs(project: Project, models: Mapping[str, Model], names: Sequence[str]) -> list[_Spec]:
    out = []
    for n in names:
        m = models[n]
        if not m.config.tests or m.config_path is None:
            continue
        rel = str(m.config_path.relative_to(project.root))
        node = compose(m.config_path.read_text(encoding="utf-8"))
        out += [_Spec(n, t, Where(rel, node, ("tests", i)), m.config_path.parent) for i, t in enumerate(m.config.tests)]
    return out


def _project_specs(project: Project, models: Mapping[str, Model], issues: list[ConfigIssue]) -> list[_Spec]:
    """The tests of `tests/*.yaml` (every file is checked, whichever models are selected)."""
    folder = project.root / "tests"
    out = []
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
        rel = str(path.relative_to(project.root))
        node = compose(path.read_text(encoding="utf-8"))
        if node is not None and not isinstance(node, yaml.MappingNode):
            issues.append(ConfigIssue(rel, 1, "(file)", "is not a test file: it holds no `unit_tests:` mapping",
                                      "a YAML file in tests/ holds `unit_tests: [...]`; keep files of rows in a subfolder, e.g. tests/fixtures/"))
            continue
        parsed, found = load_model(path, UnitTestFile, rel)
        issues += found
        if parsed is None:
            continue
        for i, t in enumerate(parsed.unit_tests):
            where = Where(rel, node, ("unit_tests", i))
            if t.model.lower() not in models:
                hint = difflib.get_close_matches(t.model.lower(), sorted(models), n=1)
                issues.append(where.issue(("model",), f"no model named {t.model}", f"did you mean {hint[0]}?" if hint else "name a model, e.g. dws.user_agg"))
                continue
            out.append(_Spec(t.model.lower(), t, where, path.parent))
    return out


def _resolve(project: Project, m: Model, spec: _Spec, analyses: Analyses, tracer: Tracer) -> Case | list[ConfigIssue]:
    t, where = spec.test, spec.where
    resolved = resolve_inputs(project, m, t, spec.where, spec.base, analyses, tracer)
    if isinstance(resolved, list):
        return resolved
    inputs, final, rounds = resolved
    try:
        got = read_rows(t.expect, spec.base, project.root)
    except RowsError as e:
        return [where.issue(("expect", e.field), e.problem, e.fix, e.file, e.line)]
    columns: dict[str, str] = {}
    first: dict[str, int] = {}
    for r, row in enumerate(got.rows):
        for c in row:
            columns.setdefault(c.lower(), c)
            first.setdefault(c.lower(), r)
    known = tracer.columns(m.name)
    issues = []
    for low, c in columns.items():
        if known is not None and low not in known:
            hint = difflib.get_close_matches(low, known, n=1)
            loc: tuple[int | str, ...] = ("expect", "rows") if got.csv else ("expect", "rows", first[low], c)  # CSV: its header
            issues.append(where.issue(loc, f"{m.name} returns no column {c} (its columns: {', '.join(known)})",
                                      f"did you mean {hint[0]}?" if hint else "name a column the model returns",
                                      got.file, 1 if got.file else None))
    if issues:
        return issues
    expect = tuple({columns[k.lower()]: v for k, v in row.items()} for row in got.rows)
    key = analyses.of(m).key
    return Case(m, t.name, where.rel, where.line, inputs, final, rounds, expect, tuple(columns.values()), t.ordered, key)
