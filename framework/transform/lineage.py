"""Column lineage: which upstream columns a model column derives from, down to ODS (no Spark).

SQL models are traced with sqlglot's ``lineage`` (Spark dialect) one model at a time; a column
that comes from another SQL model is traced again inside that model, so a DWS column resolves to
DWD columns and those to ODS columns. sqlglot needs the upstream schemas to expand ``SELECT *``
and to place an unqualified column of a join; lake knows them for SQL models whose output is
named (derived from their SQL) and for ODS tables already in the warehouse (the Parquet footer of
a base file). Whatever stays unknown is said in the node's ``note``, never guessed silently.
Python models declare only ``depends_on``: their columns are not traceable.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, lineage
from sqlglot.optimizer.qualify import qualify

from framework.errors import LakeError
from framework.project.config import Project
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.transform.loader import Model

Kind = Literal["sql", "python", "ods", "external", "unknown"]
# Hudi's own columns and lake's bookkeeping columns: not visible through `ods.<name>`.
_HIDDEN_PREFIXES = ("_hoodie_", "_lake_")
_HIDDEN = ("_deleted",)
_GROUP_ALIAS = "_lake_group_"


@dataclass(frozen=True)
class LineageNode:
    """One column of one table, with the columns it is computed from."""

    table: str
    column: str
    kind: Kind
    expression: str | None = None  # how the model computes the column (Spark SQL)
    sources: tuple[LineageNode, ...] = ()  # columns the value is computed from
    grouped_by: tuple[LineageNode, ...] = ()  # GROUP BY keys of an aggregate column
    note: str | None = None  # what could not be traced, and why

    @property
    def name(self) -> str:
        return f"{self.table}.{self.column}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"column": self.name, "kind": self.kind}
        if self.expression is not None:
            out["expression"] = self.expression
        if self.note:
            out["note"] = self.note
        out["sources"] = [s.to_dict() for s in self.sources]
        if self.grouped_by:
            out["grouped_by"] = [g.to_dict() for g in self.grouped_by]
        return out

    def leaves(self) -> set[str]:
        """Fully qualified columns at the end of every path (sources and group keys)."""
        children = self.sources + self.grouped_by
        if not children:
            return {self.name}
        return set().union(*(c.leaves() for c in children))


@dataclass
class Tracer:
    """Traces columns through the models of one project; schemas are derived once, lazily."""

    project: Project
    models: dict[str, Model]
    ods_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _columns: dict[str, tuple[str, ...] | None] = field(default_factory=dict, init=False)

    @classmethod
    def for_project(cls, project: Project, models: dict[str, Model]) -> Tracer:
        """A tracer that knows the ODS schemas of tables already written to the warehouse."""
        layout = Layout(project.warehouse)
        found = {}
        for t in project.ods_tables:
            cols = warehouse_columns(layout.table(t.qualified_name))
            if cols is not None:
                found[t.qualified_name] = cols
        return cls(project, models, found)

    # -- schemas ---------------------------------------------------------------------------
    def columns(self, table: str) -> tuple[str, ...] | None:
        """Output columns of a table, or None when lake cannot know them without Spark."""
        if table in self.ods_columns:
            return self.ods_columns[table]
        if table not in self._columns:
            m = self.models.get(table)
            self._columns[table] = None  # also guards against re-entry
            if m is not None and m.sql is not None:
                self._columns[table] = output_columns(m.sql, self.schema_for(m))
        return self._columns[table]

    def schema_for(self, model: Model) -> dict[str, dict[str, dict[str, str]]]:
        """sqlglot schema of a model's upstreams whose columns are all known."""
        schema: dict[str, dict[str, dict[str, str]]] = {}
        for up in model.upstreams:
            cols = self.columns(up)
            if cols is not None and "." in up:
                db, name = up.split(".", 1)
                schema.setdefault(db, {})[name] = dict.fromkeys(cols, "unknown")
        return schema

    # -- tracing ---------------------------------------------------------------------------
    def trace(self, target: str) -> LineageNode:
        """Lineage of `<layer>.<table>.<column>`; LakeError with a suggestion when unknown."""
        parts = target.strip().lower().split(".")
        if len(parts) != 3 or not all(parts):
            raise LakeError(f"{target!r} is not <layer>.<model>.<column>",
                            fix="name a column of a model, e.g. lake lineage dws.user_agg.num")
        table, column = f"{parts[0]}.{parts[1]}", parts[2]
        known = sorted(set(self.models) | {t.qualified_name for t in self.project.ods_tables})
        if table not in known:
            hint = difflib.get_close_matches(table, known, n=1)
            raise LakeError(f"no model or ODS table named {table}",
                            fix=f"did you mean {hint[0]}?" if hint else "list models with `lake dag`")
        return self._column(table, column, strict=True)

    def _column(self, table: str, column: str, *, strict: bool = False) -> LineageNode:
        model = self.models.get(table)
        if model is None:
            if table.startswith("ods."):
                return self._ods(table, column, strict)
            if table in self.project.externals:  # a source whose columns lake knows only when it reads it
                return LineageNode(table, column, "external")
            return LineageNode(table, column, "unknown", note=f"{table} is not a table of this project")
        if model.sql is None:
            return LineageNode(table, column, "python", note=(
                f"Python model ({model.rel}): its columns are not traceable; "
                f"it depends on {', '.join(model.upstreams)}"))
        return self._sql(model, column, strict)

    def _ods(self, table: str, column: str, strict: bool) -> LineageNode:
        cols = self.ods_columns.get(table)
        if cols is not None and column not in cols:
            if strict:
                raise _unknown_column(table, column, cols, "its schema in the warehouse")
            return LineageNode(table, column, "ods", note=f"not in the warehouse schema of {table}")
        return LineageNode(table, column, "ods")

    def _sql(self, model: Model, column: str, strict: bool) -> LineageNode:
        assert model.sql is not None
        tree = normalize(sqlglot.parse_one(model.sql, read="spark"))
        schema = self.schema_for(model)
        try:
            root = lineage(column, tree, schema, dialect="spark")
        except SqlglotError as e:
            if "Cannot find column" not in str(e):
                raise LakeError(f"cannot trace {model.name}.{column}: {e}",
                                fix=f"check the SELECT in {model.rel}") from e
            cols = self.columns(model.name)
            if cols is None:  # a `*` lake cannot expand hides the column, if it is there at all
                unknown = self._unknown_stars(model)
                if not strict:
                    return LineageNode(model.name, column, "sql", note=(
                        f"cannot trace {column!r} through SELECT * of {unknown}: those columns are unknown"))
                named = [c for c in getattr(tree, "named_selects", []) if c != "*"]
                raise LakeError(
                    f"{model.name} has no named column {column!r}, and the columns of its SELECT * "
                    f"of {unknown} are unknown",
                    fix=(f"named columns: {', '.join(named) or 'none'}; to expand *, run `lake ingest` "
                         "so the ODS schema is in the warehouse, or list the columns in the SELECT"),
                ) from e
            if strict:
                raise _unknown_column(model.name, column, cols, model.rel) from e
            return LineageNode(model.name, column, "sql", note=f"{model.rel} has no column {column!r}")
        sources, note = self._leaves(root, model)
        projection = root.expression.this if isinstance(root.expression, exp.Alias) else root.expression
        grouped = self._group_keys(model, tree, schema, projection)
        if not sources and not grouped and note is None:
            note = "computed without reading an upstream column (e.g. COUNT(*) or a constant)"
        return LineageNode(model.name, column, "sql", projection.sql("spark"), sources, grouped, note)

    def _leaves(self, root: Node, model: Model) -> tuple[tuple[LineageNode, ...], str | None]:
        """Trace each upstream column the sqlglot lineage tree ends in; notes for the rest."""
        refs: list[tuple[str, str, bool]] = []
        ambiguous: list[str] = []

        def walk(node: Node, parent: Node | None) -> None:
            if node.downstream:
                for child in node.downstream:
                    walk(child, node)
                return
            if isinstance(node.expression, exp.Table):
                table = ".".join(p for p in (node.expression.db, node.expression.name) if p).lower()
                col = node.name.split(".")[-1].lower()
                star = col == "*"
                if star and parent is not None:
                    col = parent.name.split(".")[-1].lower()
                if (table, col, star) not in refs:
                    refs.append((table, col, star))
            elif isinstance(node.expression, exp.Placeholder):
                ambiguous.append(node.name)

        walk(root, None)
        out = []
        for table, col, star in sorted(refs):  # sqlglot's order varies from run to run
            child = self._column(table, col)
            if star:
                child = _with_note(child, f"reached through SELECT * of {table}, whose columns lake "
                                          "does not know; assumed to be a column of it")
            out.append(child)
        note = None
        if ambiguous:
            ups = ", ".join(model.upstreams)
            note = (f"unqualified column(s) {', '.join(sorted(set(ambiguous)))} could come from any of "
                    f"{ups}: their schemas are unknown (qualify them, e.g. u.name, in {model.rel})")
        return tuple(out), note

    def _group_keys(self, model: Model, tree: exp.Expr, schema: dict[str, Any],
                    projection: exp.Expr) -> tuple[LineageNode, ...]:
        """The GROUP BY keys an aggregate column depends on (top-level SELECT only)."""
        if not isinstance(tree, exp.Select) or not tree.args.get("group") or not projection.find(exp.AggFunc):
            return ()
        keys: list[LineageNode] = []
        for i, key in enumerate(tree.args["group"].expressions):
            probe = tree.copy()
            probe.select(exp.alias_(key.copy(), f"{_GROUP_ALIAS}{i}"), copy=False)
            try:
                root = lineage(f"{_GROUP_ALIAS}{i}", probe, schema, dialect="spark")
            except SqlglotError:
                continue
            leaves, _ = self._leaves(root, model)
            keys += [k for k in leaves if k not in keys]
        return tuple(keys)

    def _unknown_stars(self, model: Model) -> str:
        unknown = [u for u in model.upstreams if self.columns(u) is None]
        return ", ".join(unknown) + " (not ingested yet)" if unknown else "an upstream"


def normalize(tree: exp.Expr) -> exp.Expr:
    """Replace GROUP BY ordinals and output aliases by the projected expression (Spark allows both;
    sqlglot can only resolve an alias when it knows the upstream schema)."""
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if not group:
            continue
        by_alias = {s.alias.lower(): s.this for s in select.expressions if isinstance(s, exp.Alias)}
        for key in list(group.expressions):
            target: exp.Expr | None = None
            if isinstance(key, exp.Literal) and not key.is_string and key.name.isdigit():
                idx = int(key.name) - 1
                if 0 <= idx < len(select.expressions):
                    proj = select.expressions[idx]
                    target = proj.this if isinstance(proj, exp.Alias) else proj
            elif isinstance(key, exp.Column) and not key.table and key.name.lower() in by_alias:
                proj = by_alias[key.name.lower()]
                if not (isinstance(proj, exp.Column) and proj.name.lower() == key.name.lower()):
                    target = proj
            if target is not None:
                key.replace(target.copy())
    return tree


def output_columns(sql: str, schema: dict[str, Any]) -> tuple[str, ...] | None:
    """Names of a SELECT's output columns; None when a `*` cannot be expanded with `schema`."""
    try:
        tree = qualify(normalize(sqlglot.parse_one(sql, read="spark")), schema=schema,
                      dialect="spark", validate_qualify_columns=False)
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Query) or tree.is_star:
        return None
    return tuple(c.lower() for c in tree.named_selects)


def warehouse_columns(where: Location) -> tuple[str, ...] | None:
    """Visible columns of a Hudi table (see :func:`warehouse_schema`)."""
    schema = warehouse_schema(where)
    return None if schema is None else tuple(name for name, _ in schema)


def warehouse_schema(where: Location) -> list[tuple[str, str]] | None:
    """Visible columns of a Hudi table and their Spark SQL types, from the footer of its newest
    Parquet base file (a table off the local disk: from its schema in the running Spark session,
    unknown without one)."""
    if not where.is_local:
        return _remote_schema(where)
    table_dir = where.local
    if not (table_dir / ".hoodie").is_dir():
        return None
    files = [p for p in table_dir.rglob("*.parquet") if ".hoodie" not in p.parts]
    if not files:
        return None
    import pyarrow.parquet as pq  # pyarrow reads only the footer: no Spark, a few ms

    newest = max(files, key=lambda p: p.stat().st_mtime)
    return [(f.name.lower(), _sql_type(str(f.type))) for f in pq.read_schema(newest)
            if not f.name.startswith(_HIDDEN_PREFIXES) and f.name not in _HIDDEN]


def _sql_type(arrow: str) -> str:
    """Arrow's name of a Parquet column type as Spark SQL names it (`int64` -> bigint)."""
    simple = {"int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint", "float": "float",
              "double": "double", "string": "string", "large_string": "string", "bool": "boolean", "binary": "binary",
              "date32[day]": "date"}
    if arrow in simple:
        return simple[arrow]
    if arrow.startswith("timestamp"):
        return "timestamp"
    if arrow.startswith("decimal"):
        return "decimal" + arrow[arrow.index("("):].replace(" ", "")
    return arrow


def _remote_schema(where: Location) -> list[tuple[str, str]] | None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    sc = SparkContext._active_spark_context
    if sc is None or not hudi.table_exists(where):
        return None
    fields = SparkSession(sc).read.format("hudi").load(str(where)).schema.fields
    return [(f.name.lower(), f.dataType.simpleString()) for f in fields
            if not f.name.startswith(_HIDDEN_PREFIXES) and f.name not in _HIDDEN]


def _with_note(node: LineageNode, note: str) -> LineageNode:
    text = f"{note}; {node.note}" if node.note else note
    return LineageNode(node.table, node.column, node.kind, node.expression, node.sources, node.grouped_by, text)


def _unknown_column(table: str, column: str, cols: tuple[str, ...] | list[str], where: str) -> LakeError:
    hint = difflib.get_close_matches(column, list(cols), n=1)
    listed = ", ".join(cols) or "none known"
    return LakeError(f"{table} has no column {column!r} (per {where})",
                     fix=(f"did you mean {table}.{hint[0]}? " if hint else "") + f"columns: {listed}")
