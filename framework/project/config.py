"""Load a lake project: `lake.yaml` plus the declarations under `layers/`.

Every problem in every file is collected and raised together as one :class:`ConfigError` naming
file, line, field and fix, before any Spark session exists.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from framework.errors import ConfigError, ConfigIssue
from framework.project.checks import parse_checks
from framework.project.externals import EXTERNAL_LAYER, ExternalTable, external_files
from framework.project.targets import Request, inline_passwords, read_yaml, redact, requested
from framework.project.types import normalize
from framework.runtime.location import Location
from models.config import (
    _IDENT,
    FIX_SEPARATOR,
    NOT_TIME_TYPES,
    ORDERING_TYPES,
    LakeConfig,
    OdsFile,
    OdsTable,
    ScheduleConfig,
)
from models.external_config import ExternalConfig
from models.quality import CheckSpec

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Project:
    """A loaded, validated project."""

    root: Path
    config: LakeConfig
    ods_tables: tuple[OdsTable, ...]
    ods_files: dict[str, str] = field(default_factory=dict)  # ods table name -> declaring file
    # Tables models read and lake never writes, `external.<name>` (framework/project/externals.py).
    externals: dict[str, ExternalTable] = field(default_factory=dict)
    target: str | None = None  # the `targets:` entry applied to lake.yaml (framework/project/targets.py)
    # Values `${VAR}` put into lake.yaml and the ODS YAML (value -> variable name): secrets maybe,
    # never to be shown in alerts or records (framework/observe/redact.py).
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def warehouse(self) -> Location:
        """The warehouse: a local folder (relative paths from the project root) or a URI."""
        return Location.parse(self.config.warehouse, self.root)

    @property
    def local_state(self) -> Path:
        """Where lake keeps what belongs to this machine, not the warehouse (Spark's logs): under
        a local warehouse's `_lake/`, else the project's `out/`."""
        w = self.warehouse
        return w.local / "_lake" if w.is_local else self.root / "out" / "lake"

    def ods_table(self, name: str) -> OdsTable:
        short = name.removeprefix("ods.")
        for t in self.ods_tables:
            if t.table_name == short:
                return t
        known = [t.qualified_name for t in self.ods_tables]
        hint = difflib.get_close_matches(f"ods.{short}", known, n=1)
        raise ConfigError(
            [
                ConfigIssue(
                    "layers/ods/",
                    None,
                    "tables",
                    f"no ODS table named ods.{short}",
                    f"did you mean {hint[0]}?" if hint else f"declared tables: {', '.join(known) or 'none'}",
                )
            ]
        )


def _node_at(node: yaml.Node | None, loc: tuple[int | str, ...]) -> yaml.Node | None:
    """Walk a composed YAML node tree along a pydantic error location."""
    for part in loc:
        if node is None:
            return None
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == part:
                    nxt = v
                    break
            if nxt is None:
                return node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return node
            node = node.value[part]
        else:
            return node
    return node


def _key_node(node: yaml.Node | None, loc: tuple[int | str, ...]) -> yaml.Node | None:
    """The node of the key itself for an unknown-key error (points at the typo's line)."""
    if not loc or isinstance(loc[-1], int):
        return _node_at(node, loc)
    parent = _node_at(node, loc[:-1])
    if isinstance(parent, yaml.MappingNode):
        for k, _ in parent.value:
            if k.value == loc[-1]:
                return k
    return parent


def _fields_of(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Allowed keys at a location, for 'did you mean'."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        f = current.model_fields.get(part)
        if f is None:
            return []
        ann = f.annotation
        current = _unwrap(ann)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(ann: Any) -> Any:
    args = getattr(ann, "__args__", None)
    if not args:
        return ann
    for a in args:
        u = _unwrap(a)
        if isinstance(u, type) and issubclass(u, BaseModel):
            return u
    return ann


def _fix_for(err: dict[str, Any], model: type[BaseModel]) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    name = str(loc[-1]) if loc else ""
    if kind == "lake_check":  # framework/project/checks.py carries its own fix
        return str(err["ctx"]["fix"])
    if kind == "extra_forbidden":
        allowed = _fields_of(model, loc[:-1])
        close = difflib.get_close_matches(name, allowed, n=1)
        if close:
            return f"did you mean `{close[0]}`? allowed keys here: {', '.join(allowed)}"
        return f"remove `{name}`; allowed keys here: {', '.join(allowed) or '(none)'}"
    if kind == "missing":
        return f"add `{name}:` here"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"use one of {expected}"
    if kind in ("too_short", "list_type"):
        return f"give `{name}` as a non-empty list, e.g. `{name}: [id]`"
    if kind.startswith(("int_", "float_", "bool_", "string_")):
        return f"give `{name}` a value of the right type ({err['msg'].lower()})"
    if kind == "union_tag_invalid":
        tag = str(err.get("ctx", {}).get("discriminator", "'kind'")).strip("'")
        return f"set `{tag}:` to one of {err.get('ctx', {}).get('expected_tags', '')}"
    return err["msg"].removeprefix("Value error, ").partition(FIX_SEPARATOR)[2] or err["msg"].removeprefix("Value error, ")


def load_model(path: Path, model: type[M], rel: str, secrets: dict[str, str] | None = None) -> tuple[M | None, list[ConfigIssue]]:
    """Parse one YAML file into `model` (`${VAR}` expanded), returning issues instead of raising."""
    found, issues, _ = load_document(path, model, rel, secrets=secrets)
    return found, issues


def load_document(path: Path, model: type[M], rel: str, *, targets: bool = False, request: Request | None = None,
                  secrets: dict[str, str] | None = None) -> tuple[M | None, list[ConfigIssue], str | None]:
    """load_model, and with `targets` (lake.yaml) the chosen target applied: its name is returned.
    `secrets` receives the values `${VAR}` expanded (value -> variable name)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        return None, [ConfigIssue(rel, None, "(file)", f"cannot read: {e.strerror}", "check the path and permissions")], None
    try:
        doc = read_yaml(text, rel, targets=targets, request=request)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e)
        return None, [ConfigIssue(rel, line, "(yaml)", f"not valid YAML: {problem}", "fix the YAML syntax at that line (indentation, a missing ':' or quote)")], None
    if doc.issues:
        return None, doc.issues, None
    if secrets is not None:
        secrets.update(doc.secrets)
    data, node = doc.data, doc.node
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, [ConfigIssue(rel, 1, "(file)", "must be a mapping of keys to values", "see docs/reference/lake-yaml.md or docs/reference/ods-yaml.md for the expected keys")], None
    data, found = _parsed(data, model, ())
    try:
        return model.model_validate(data), [], doc.target
    except ValidationError as ve:
        errors: list[dict[str, Any]] = []
        for err in ve.errors():
            # A value _parsed found wrong was replaced by None: its own errors stand where
            # pydantic reports the None, so the order of the messages is the fields' order.
            errors += found.get(tuple(err["loc"]), [dict(err)])
        return None, [redact(_issue(err, node, rel, model), doc.secrets) for err in errors], None


# Tags of discriminated unions (source kind, alert target kind, lineage transport type): pydantic
# puts them in error locations, the YAML has no such key.
_TAGS = ("files", "kafka", "webhook", "command", "http", "file")


def _issue(err: dict[str, Any], node: yaml.Node | None, rel: str, model: type[BaseModel]) -> ConfigIssue:
    """One pydantic-style error as file, line, field, problem and fix."""
    loc = tuple(err["loc"])
    # Drop pydantic's discriminator tag from locations such as ('ods','source','files','path').
    loc = tuple(p for i, p in enumerate(loc) if p not in _TAGS or i == len(loc) - 1)
    target = _key_node(node, loc) if err["type"] in ("extra_forbidden", "lake_check") else _node_at(node, loc)
    line = target.start_mark.line + 1 if target is not None else None
    dotted = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc).replace(".[", "[")
    problem = err["msg"].removeprefix("Value error, ").partition(FIX_SEPARATOR)[0]
    if err["type"] == "extra_forbidden":
        problem = "unknown key"
    return ConfigIssue(rel, line, dotted or "(root)", problem, _fix_for(err, model))


Errors = dict[tuple[int | str, ...], list[dict[str, Any]]]


def _parsed(data: object, model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[object, Errors]:
    """`data` (YAML for `model`) with every `checks:` list parsed into CheckSpecs and every schedule's
    cron read by the scheduler's parser: the behaviour models/ types leave to the framework.

    A wrong value is replaced by None, for which pydantic reports one error at its location; the
    returned errors (by location) stand in for that one. Containers are copied, never changed (YAML
    aliases share them)."""
    if not isinstance(data, dict):
        return data, {}
    out, errors = dict(data), Errors()
    for name, f in model.model_fields.items():
        if name not in data:
            continue
        value, at = data[name], (*loc, name)
        args = get_args(f.annotation) if get_origin(f.annotation) is list else ()
        if args == (CheckSpec,) and isinstance(value, list):
            specs, issues = parse_checks(value)
            out[name] = None if issues else specs
            if issues:
                errors[at] = [{"type": "lake_check", "loc": (*at, *i.loc), "msg": i.problem, "ctx": {"fix": i.fix}} for i in issues]
        elif model is ScheduleConfig and name == "cron" and isinstance(value, str):
            problem = _cron_problem(value)
            if problem:
                out[name], errors[at] = None, [{"type": "value_error", "loc": at, "msg": f"Value error, {problem}"}]
        elif args and _is_model(args[0]) and isinstance(value, list):
            items = [_parsed(item, args[0], (*at, i)) for i, item in enumerate(value)]
            out[name] = [item for item, _ in items]
            errors.update(e for _, found in items for e in found.items())
        elif isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            out[name], found = _parsed(value, f.annotation, at)
            errors.update(found)
    return out, errors


def _is_model(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _cron_problem(v: str) -> str | None:
    """Why `v` is not a cron expression (problem + FIX_SEPARATOR + fix), or None."""
    # The scheduler library's own parser; imported here, as APScheduler is needed only for schedules.
    from framework.project.cron import cron_trigger

    try:
        cron_trigger(v, "UTC")
    except ValueError as e:
        return (
            f"{v!r} is not a cron expression: {e}{FIX_SEPARATOR}use minute hour day month "
            "day-of-week, e.g. '0 2 * * *' for 02:00 daily or '*/15 * * * 1-5' for every 15 min "
            "on weekdays (a 6th field in front adds seconds)"
        )
    return None


def _column_issues(rel: str, i: int, t: OdsTable) -> list[ConfigIssue]:
    """`ordering:` and `partition_by.column` against the types `columns:` declares (the types
    of columns it leaves out are known only from the events: framework/ods/tablecheck.py)."""
    out = []
    for c in t.ordering:
        typ = normalize(t.columns[c]) if c in t.columns else None
        if typ is not None and typ not in ORDERING_TYPES:
            out.append(ConfigIssue(rel, None, f"tables[{i}].ordering", f"column {c!r} is declared {typ.upper()} in `columns:`; ordering needs a timestamp, date or integer column", f"order by another column, or declare {c!r} as timestamp, date or bigint if its values are one"))
    p = t.partition_by
    if p and p.column in t.columns and normalize(t.columns[p.column]) in NOT_TIME_TYPES:
        out.append(ConfigIssue(rel, None, f"tables[{i}].partition_by.column", f"column {p.column!r} is declared {t.columns[p.column].upper()} in `columns:`, which has no time to partition by", "partition by a timestamp, date or text date column"))
    return out


def unexpanded(project: Project) -> dict[str, Any]:
    """The project's lake.yaml as written, its target applied but every `${VAR}` kept: what a copy
    of its settings may contain (the values of those variables may be secrets)."""
    path = project.root / "lake.yaml"
    request = Request(project.target, "--target") if project.target else None
    doc = read_yaml(path.read_text(encoding="utf-8"), "lake.yaml", targets=True, request=request, expand=False)
    return dict(doc.data) if isinstance(doc.data, dict) else {}


def _load_externals(root: Path) -> tuple[dict[str, ExternalTable], list[ConfigIssue]]:
    """Every external table declared under `root`'s `layers/external/`, and the problems of the others."""
    out: dict[str, ExternalTable] = {}
    issues: list[ConfigIssue] = []
    for path in external_files(root):
        rel = f"layers/{EXTERNAL_LAYER}/{path.name}"
        name = f"{EXTERNAL_LAYER}.{path.stem}"
        if not _IDENT.match(path.stem):
            issues.append(ConfigIssue(rel, None, "(file)", f"{name} is not a name of letters, digits and underscores (not "
                                      "starting with a digit): it is the name models read the table by", "rename the file"))
            continue
        if name in out:
            issues.append(ConfigIssue(rel, None, "(file)", f"{name} is also declared in {out[name].rel}", "keep one of the two files"))
            continue
        cfg, found = load_model(path, ExternalConfig, rel)
        issues += found
        if cfg is None:
            continue
        loc = Location.parse(cfg.path, root) if cfg.path is not None else None
        out[name] = ExternalTable(name, rel, cfg, loc)
    return out, issues


def load_project(root: Path | str, target: str | None = None) -> Project:
    """Load and validate a whole project; raise one ConfigError listing every problem. `target`:
    the `targets:` entry to apply (else LAKE_TARGET's, else `default_target:`, else none)."""
    root = Path(root).resolve()
    issues: list[ConfigIssue] = []
    cfg_path = root / "lake.yaml"
    if not cfg_path.exists():
        raise ConfigError(
            [ConfigIssue(str(cfg_path), None, "(file)", "no lake.yaml here", f"run `lake init {root}` or pass --project DIR")]
        )
    secrets: dict[str, str] = {}
    cfg, found, chosen = load_document(cfg_path, LakeConfig, "lake.yaml", targets=True, request=requested(target), secrets=secrets)
    issues += found
    tables: list[OdsTable] = []
    files: dict[str, str] = {}
    sources: dict[str, str] = {}
    ods_dir = root / "layers" / "ods"
    for path in sorted(ods_dir.glob("*.y*ml")) if ods_dir.is_dir() else []:
        rel = str(path.relative_to(root))
        parsed, found = load_model(path, OdsFile, rel, secrets)
        issues += found
        if parsed is None:
            continue
        for i, t in enumerate(parsed.tables):
            if t.table_name in files:
                issues.append(ConfigIssue(rel, None, f"tables[{i}].name", f"ods.{t.table_name} is also declared in {files[t.table_name]}", "give one of them another `name:`"))
            if t.source in sources:
                issues.append(ConfigIssue(rel, None, f"tables[{i}].source", f"{t.source} is also declared in {sources[t.source]}", "declare each source table once"))
            if t.partition_by and t.partition_by.derived_name in t.key:
                issues.append(ConfigIssue(rel, None, f"tables[{i}].partition_by.name", "the derived partition column clashes with a key column", "choose another `name:`"))
            issues += _column_issues(rel, i, t)
            if t.history and not t.key:
                issues.append(ConfigIssue(rel, None, f"tables[{i}].key", "`history: true` without `key:`: a history has one row per version of each key",
                                          "add `key: [id]`"))
            if not t.key and cfg is not None and cfg.ods.source.kind != "kafka":
                issues.append(ConfigIssue(rel, None, f"tables[{i}].key", "no record key", "add `key: [id]` (only the Kafka source can take keys from message keys)"))
            files[t.table_name] = rel
            sources[t.source] = rel
            tables.append(t)
    for t in tables:
        if t.history and f"{t.table_name}_history" in files:
            issues.append(ConfigIssue(files[t.table_name], None, "history", f"{t.history_name}, the history of {t.qualified_name}, is also "
                                      f"declared in {files[t.table_name + '_history']}", "give one of the two tables another `name:`"))
    externals, found = _load_externals(root)
    issues += found
    if cfg is not None and cfg.reconcile is not None:
        issues += inline_passwords(cfg.reconcile.sources, secrets)
    if issues:
        raise ConfigError(issues)
    assert cfg is not None
    return Project(root=root, config=cfg, ods_tables=tuple(tables), ods_files=files, externals=externals, target=chosen,
                   secrets=secrets)
