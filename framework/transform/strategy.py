"""Strategy inference from a model's SQL (sqlglot, Spark dialect).

- rowwise: select/filter/project of one upstream whose key is projected → upsert changed keys,
  delete keys whose row was deleted or no longer passes the filter;
- aggregate: GROUP BY of one upstream with SUM/COUNT/AVG/MIN/MAX (HAVING and expressions over
  them allowed), every GROUP BY expression projected → merge signed deltas from Hudi's CDC query;
- rescan: anything else with a key (joins, DISTINCT, subqueries) → recompute only the output keys
  the changed upstream rows can reach;
- full: no key can be derived, or windows / LIMIT / non-deterministic functions → full rebuild.
`strategy:` in the model's YAML overrides (it is checked: an impossible override is an error).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from framework.transform.aggstate import StateColumns

MERGEABLE = (exp.Sum, exp.Count, exp.Avg, exp.Min, exp.Max)
NONDETERMINISTIC = {"rand", "random", "randn", "uuid", "current_timestamp", "now", "current_date", "monotonically_increasing_id", "shuffle"}


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call of an aggregate model, with the state kept for it."""

    index: int
    func: str  # sum | count | count_star | avg | min | max
    arg_sql: str | None  # Spark SQL of the argument (None for COUNT(*))
    node_sql: str  # the call as written, for display

    @property
    def columns(self) -> StateColumns:
        """Its state columns (framework/transform/aggstate.py)."""
        return StateColumns(self.index, self.func)

    @property
    def state(self) -> list[str]:
        return self.columns.stored


@dataclass(frozen=True)
class Analysis:
    strategy: str
    reason: str
    upstreams: tuple[str, ...]
    key: tuple[str, ...] | None = None
    group_by: tuple[tuple[str, str], ...] = ()  # (expression SQL, output alias)
    aggregates: tuple[Aggregate, ...] = ()
    where_sql: str | None = None
    finalize: dict[str, str] = field(default_factory=dict)  # output alias -> SQL over state columns
    having_sql: str | None = None
    key_map: dict[str, str] = field(default_factory=dict)  # rowwise: upstream key col -> output col


def _agg_kind(node: Any) -> str:
    if isinstance(node, exp.Count):
        arg = node.this
        if arg is None or isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not arg.is_string):
            return "count_star"
        return "count"
    return {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}[type(node)]


def _visible_expr(a: Aggregate) -> str:
    # An AVG reads the column the builder computes from the typed state (aggstate.average_sql);
    # the builder casts each result to the type the plain query would have.
    return a.columns.visible_sql()


def analyze(sql: str, upstream_key: Callable[[str], tuple[str, ...] | None], declared_key: list[str] | None = None, override: str | None = None) -> Analysis:
    """Infer the strategy of a SQL model; `upstream_key` gives the key of an upstream table."""
    tree: Any = sqlglot.parse_one(sql, read="spark")
    ups = tuple(dict.fromkeys(f"{t.db}.{t.name}".lower() for t in tree.find_all(exp.Table) if t.db))
    a = _infer(tree, ups, upstream_key, declared_key)
    if override is None or override == a.strategy:
        return a
    if override == "full":
        return Analysis("full", "strategy: full in the model's YAML", ups, a.key)
    if override == "rescan":
        key = a.key or (tuple(declared_key) if declared_key else None)
        if key is None:
            raise ValueError("strategy: rescan needs a key: add `key: [...]` to the model's YAML")
        if a.strategy == "full":
            raise ValueError(f"strategy: rescan is not possible here ({a.reason})")
        return Analysis("rescan", "strategy: rescan in the model's YAML", ups, key)
    raise ValueError(f"strategy: {override} is not possible for this SQL: lake infers {a.strategy} ({a.reason})")


def _infer(tree: exp.Expression, ups: tuple[str, ...], upstream_key: Callable[[str], tuple[str, ...] | None], declared_key: list[str] | None) -> Analysis:
    declared = tuple(declared_key) if declared_key else None

    def full_or_rescan(reason: str, key: tuple[str, ...] | None) -> Analysis:
        if blockers:
            return Analysis("full", f"{reason}; {blockers[0]}: full rebuild", ups, key)
        if key:
            return Analysis("rescan", f"{reason}: recompute the output keys the changed rows reach", ups, key)
        return Analysis("full", f"{reason} and no key to scope a rescan (add `key:` to the model's YAML)", ups, None)

    blockers = []
    if any(isinstance(n, exp.Window) for n in tree.walk()):
        blockers.append("window function")
    if tree.find(exp.Limit):
        blockers.append("LIMIT")
    funcs = {(n.sql_name() if isinstance(n, exp.Func) else "").lower() for n in tree.walk() if isinstance(n, exp.Func)}
    funcs |= {n.name.lower() for n in tree.walk() if isinstance(n, exp.Anonymous)}
    nondet = sorted(funcs & NONDETERMINISTIC)
    if nondet:
        blockers.append(f"non-deterministic {nondet[0]}()")
    if not isinstance(tree, exp.Select):
        return full_or_rescan(f"{type(tree).__name__.upper()} of queries", declared)
    group = tree.args.get("group")
    distinct_key = tuple(e.alias_or_name for e in tree.expressions) if tree.args.get("distinct") else None
    key = declared or _group_aliases(tree) or distinct_key
    if blockers:
        return Analysis("full", f"{blockers[0]}: full rebuild", ups, key)
    if tree.args.get("with"):
        return full_or_rescan("WITH clause", key)
    if len(ups) != 1 or tree.find(exp.Join) or any(isinstance(s, exp.Subquery) for s in tree.find_all(exp.Subquery)):
        what = f"joins {len(ups)} tables" if len(ups) > 1 or tree.find(exp.Join) else "subquery"
        return full_or_rescan(what, key)
    if tree.args.get("distinct"):
        return full_or_rescan("DISTINCT", key)
    aggs = [n for n in tree.find_all(exp.AggFunc)]
    if group or aggs:
        bad = [n for n in aggs if not isinstance(n, MERGEABLE) or isinstance(n.this, exp.Distinct)]
        if bad:
            return full_or_rescan(f"{bad[0].sql(dialect='spark')} is not a mergeable aggregate", key)
        if not group:
            return full_or_rescan("aggregate without GROUP BY", key)
        return _aggregate(tree, ups, key) or full_or_rescan("a GROUP BY expression is not in the select list", key)
    return _rowwise(tree, ups, upstream_key) or full_or_rescan("the upstream key is not projected", key)


def _group_aliases(tree: exp.Select) -> tuple[str, ...] | None:
    group = tree.args.get("group")
    if not group:
        return None
    out = []
    for g in group.expressions:
        alias = _projected_alias(tree, g)
        if alias is None:
            return None
        out.append(alias)
    return tuple(out)


def _projected_alias(tree: exp.Select, g: exp.Expression) -> str | None:
    gs = g.sql(dialect="spark").lower()
    for p in tree.expressions:
        inner = p.this if isinstance(p, exp.Alias) else p
        if inner.sql(dialect="spark").lower() == gs or (isinstance(g, exp.Column) and p.alias_or_name.lower() == g.name.lower() and not isinstance(inner, exp.AggFunc)):
            return p.alias_or_name
    return None


def _aggregate(tree: exp.Select, ups: tuple[str, ...], key: tuple[str, ...] | None) -> Analysis | None:
    group = tree.args["group"]
    groups = []
    for g in group.expressions:
        alias = _projected_alias(tree, g)
        if alias is None:
            return None
        groups.append((_strip_tables(g).sql(dialect="spark"), alias))
    aggs: dict[str, Aggregate] = {}
    having = tree.args.get("having")
    for node in list(tree.find_all(exp.AggFunc)):
        text = node.sql(dialect="spark")
        if text in aggs:
            continue
        kind = _agg_kind(node)
        arg = None if kind == "count_star" else _strip_tables(node.this).sql(dialect="spark")
        aggs[text] = Aggregate(len(aggs), kind, arg, text)

    def to_state(e: exp.Expression) -> str:
        e = e.copy()
        for node in list(e.find_all(exp.AggFunc)):
            repl = sqlglot.parse_one(_visible_expr(aggs[node.sql(dialect="spark")]), read="spark")
            if node is e:
                return repl.sql(dialect="spark")
            node.replace(repl)
        return _strip_tables(e).sql(dialect="spark")

    finalize = {}
    group_alias = {alias for _, alias in groups}
    for p in tree.expressions:
        alias = p.alias_or_name
        inner = p.this if isinstance(p, exp.Alias) else p
        finalize[alias] = alias if alias in group_alias and not inner.find(exp.AggFunc) else to_state(inner)
    where = tree.args.get("where")
    return Analysis(
        "aggregate",
        "GROUP BY of one upstream with " + "/".join(sorted({a.func.replace("count_star", "count").upper() for a in aggs.values()})) + ": merge signed deltas from the CDC query",
        ups,
        tuple(alias for _, alias in groups),
        tuple(groups),
        tuple(aggs.values()),
        _strip_tables(where.this).sql(dialect="spark") if where else None,
        finalize,
        to_state(having.this) if having else None,
    )


def _rowwise(tree: exp.Select, ups: tuple[str, ...], upstream_key: Callable[[str], tuple[str, ...] | None]) -> Analysis | None:
    ukey = upstream_key(ups[0])
    if not ukey:
        return None
    mapping: dict[str, str] = {}
    for p in tree.expressions:
        if isinstance(p, exp.Star):
            mapping.update({k: k for k in ukey})
            continue
        inner = p.this if isinstance(p, exp.Alias) else p
        if isinstance(inner, exp.Column) and inner.name in ukey and inner.name not in mapping:
            mapping[inner.name] = p.alias_or_name
    if set(mapping) != set(ukey):
        return None
    where = tree.args.get("where")
    return Analysis(
        "rowwise",
        "select/filter/project of one upstream: upsert changed keys, delete removed or filtered-out keys",
        ups,
        tuple(mapping[k] for k in ukey),
        where_sql=_strip_tables(where.this).sql(dialect="spark") if where else None,
        key_map=mapping,
    )


def _strip_tables(e: exp.Expression) -> exp.Expression:
    """Drop table qualifiers (u.device_model → device_model): single-upstream expressions."""
    e = e.copy()
    for c in e.find_all(exp.Column):
        if c.table:
            c.set("table", None)
    return e
