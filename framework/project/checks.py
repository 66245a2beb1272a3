"""`checks:` as written in YAML -> CheckSpecs (models/quality.py), or issues located inside the list.

The list forms (GE expectations with GE's arguments, lake's shorthands, `sql:` checks) are
checked against Great Expectations' own registry (expectations.py), so every problem is found at
load time, with its location inside `checks` and a fix, before Spark starts. framework/project/config.py
runs this on every `checks:` list of a file before validating the file's types.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from framework.project import expectations as gx_catalog
from framework.project.check_cache import ValidatedChecks
from models.quality import THIS, CheckSpec

SEVERITIES: tuple[str, ...] = ("error", "warn", "drop")
SQL_EXPECTATION = "unexpected_rows_expectation"
# Row-level expectations `severity: drop` supports: each has a Spark predicate selecting exactly the
# rows GE counts as unexpected (framework/quality/predicates.py; a test keeps the two in step).
DROPPABLE: tuple[str, ...] = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_null",
    "expect_column_values_to_be_between",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_match_regex",
    "expect_column_values_to_not_match_regex",
    "expect_column_value_lengths_to_be_between",
    "expect_column_value_lengths_to_equal",
)
SHORTHANDS: dict[str, str] = {
    "not_null": "not_null: [col, ...]  (expect_column_values_to_not_be_null per column)",
    "unique": "unique: [col, ...]  (expect_column_values_to_be_unique; several columns: expect_compound_columns_to_be_unique)",
    "between": "between: {column: c, min_value: 1, max_value: 9}  (expect_column_values_to_be_between)",
    "accepted_values": "accepted_values: {column: c, values: [a, b]}  (expect_column_values_to_be_in_set)",
    "row_count": "row_count: {min_value: 1}  (expect_table_row_count_to_be_between)",
}
ITEM_KEYS = ("severity", "name", "on")
_SENTINEL = "\x00this\x00"


class Issue(NamedTuple):
    loc: tuple[str | int, ...]
    problem: str
    fix: str


def _default_name(expectation: str, kwargs: dict[str, Any], short: str | None = None) -> str:
    cols: list[str] = []
    if isinstance(kwargs.get("column"), str):
        cols = [kwargs["column"]]
    elif isinstance(kwargs.get("column_list"), list):
        cols = [str(c) for c in kwargs["column_list"]]
    elif "column_A" in kwargs:
        cols = [str(kwargs["column_A"]), str(kwargs.get("column_B"))]
    head = short or expectation
    return f"{head}({', '.join(cols)})" if cols else head


def _columns(value: object) -> list[str] | None:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(c, str) and c for c in value):
        return list(value)
    return None


def _shorthand(key: str, value: object) -> tuple[list[tuple[str, dict[str, Any], str]], list[Issue], dict[str, str]]:
    """(expectation, kwargs, default name) triples for a shorthand, issues, and renamed arguments
    (GE name -> shorthand name) so messages use the user's words."""
    if key in ("not_null", "unique"):
        cols = _columns(value)
        if cols is None:
            return [], [Issue((key,), f"`{key}` takes a column or a list of columns", f"write e.g. `{key}: [id]`")], {}
        if key == "not_null":
            return [("expect_column_values_to_not_be_null", {"column": c}, f"not_null({c})") for c in cols], [], {}
        if len(cols) == 1:
            return [("expect_column_values_to_be_unique", {"column": cols[0]}, f"unique({cols[0]})")], [], {}
        return [("expect_compound_columns_to_be_unique", {"column_list": cols}, f"unique({', '.join(cols)})")], [], {}
    if value is None and key == "row_count":
        value = {}
    if not isinstance(value, dict):
        return [], [Issue((key,), f"`{key}` takes a mapping of arguments", f"write e.g. `{SHORTHANDS[key].split('  ')[0]}`")], {}
    args = dict(value)
    if key == "between":
        return [("expect_column_values_to_be_between", args, _default_name("", args, "between"))], [], {}
    if key == "accepted_values":
        renamed = {"value_set": "values"}
        if "values" in args:
            args["value_set"] = args.pop("values")
        return [("expect_column_values_to_be_in_set", args, _default_name("", args, "accepted_values"))], [], renamed
    return [("expect_table_row_count_to_be_between", args, "row_count")], [], {}


def _sql_issues(query: object) -> list[Issue]:
    if not isinstance(query, str) or not query.strip():
        return [Issue(("sql",), "`sql` must be a query (text)", 'write e.g. `sql: "select * from {{ this }} where amount < 0"`')]
    if not THIS.search(query):
        return [Issue(("sql",), "the query does not read `{{ this }}` (the data being checked)", "select from {{ this }}, e.g. `select * from {{ this }} where amount < 0`")]
    import sqlglot

    try:
        sqlglot.parse_one(THIS.sub("this_", query), read="spark")
    except sqlglot.errors.ParseError as e:
        first = e.errors[0]["description"] if e.errors else str(e)
        return [Issue(("sql",), f"not valid Spark SQL: {first}", "fix the query (it must return the failing rows)")]
    return []


def gx_query(query: str) -> str:
    """The user's query in GE's spelling: `{batch}` for the data, every other brace literal."""
    q = THIS.sub(_SENTINEL, query).replace("{", "{{").replace("}", "}}")
    return q.replace(_SENTINEL, "{batch}")


def _unknown_key(key: str) -> Issue:
    close = gx_catalog.suggest(key, [*gx_catalog.expectation_names(), *SHORTHANDS, "sql", *ITEM_KEYS])
    hint = f"did you mean `{close}`? " if close else ""
    if key.startswith("expect_"):
        return Issue((key,), f"unknown expectation `{key}`", f"{hint}names are Great Expectations' (snake_case), e.g. expect_column_values_to_not_be_null")
    return Issue((key,), f"unknown check `{key}`", f"{hint}use a GE expectation name, a shorthand ({', '.join(SHORTHANDS)}) or `sql:`")


def parse_check(item: object) -> tuple[list[CheckSpec], list[Issue]]:
    """One list item of `checks:` -> its CheckSpecs (a shorthand may stand for several), or issues
    located relative to the item."""
    if not isinstance(item, dict):
        return [], [Issue((), "each check is a mapping", "write e.g. `- not_null: [id]` or `- expect_column_values_to_be_unique: {column: id}`")]
    issues: list[Issue] = []
    severity = item.get("severity", "error")
    if severity not in SEVERITIES:
        issues.append(Issue(("severity",), f"{severity!r} is not one of error, warn, drop", "use error (blocks the commit), warn (commits and reports) or drop (quarantines failing rows)"))
        severity = "error"
    label = item.get("name")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        issues.append(Issue(("name",), "`name` must be a non-empty text", "write e.g. `name: amounts_positive`"))
        label = None
    rest = [k for k in item if k not in ITEM_KEYS]
    if not rest:
        return [], [*issues, Issue((), "no expectation in this check", f"add one, e.g. `not_null: [id]`; keys beside it: {', '.join(ITEM_KEYS)}")]
    if len(rest) > 1:
        return [], [*issues, Issue((rest[1],), f"one expectation per list item (found {', '.join(map(str, rest))})", "start a new `- ` item for each expectation")]
    key = str(rest[0])
    value = item[key]
    if "on" in item and key != "sql":
        issues.append(Issue(("on",), "`on` applies to `sql:` checks only", "remove `on:`; GE expectations run where their kind says (rows or table)"))
    if key == "sql":
        return _sql_check(item, value, label, severity, issues)
    renamed: dict[str, str] = {}
    if key in SHORTHANDS:
        calls, found, renamed = _shorthand(key, value)
        issues += found
    elif key in gx_catalog.expectation_names():
        if value is None:
            value = {}
        if not isinstance(value, dict):
            return [], [*issues, Issue((key,), f"the arguments of {key} must be a mapping", f"write e.g. `{key}: {{column: id}}`")]
        calls = [(key, dict(value), _default_name(key, value))]
    else:
        return [], [*issues, _unknown_key(key)]
    specs: list[CheckSpec] = []
    for expectation, kwargs, default_name in calls:
        for arg, problem, fix in gx_catalog.argument_problems(expectation, kwargs):
            user_arg = renamed.get(arg, arg)
            loc: tuple[str | int, ...] = (key,) if arg == expectation else (key, user_arg)
            for ge_name, user_name in renamed.items():
                problem = re.sub(rf"\b{ge_name}\b", user_name, problem)
                fix = re.sub(rf"\b{ge_name}\b", user_name, fix)
            issues.append(Issue(loc, problem, fix))
        level = gx_catalog.level_of(expectation)
        if severity == "drop":
            issues += _drop_issues(key, expectation, kwargs, level)
        name = default_name if label is None else (label if len(calls) == 1 else f"{label}({kwargs.get('column')})")
        if not issues:
            specs.append(CheckSpec(name=name, expectation=expectation, kwargs=kwargs, severity=severity, kind=level,
                                   on="rows" if level == "row" else "table"))
    return ([], issues) if issues else (specs, [])


def _sql_check(item: dict[Any, Any], query: object, label: str | None, severity: str, issues: list[Issue]) -> tuple[list[CheckSpec], list[Issue]]:
    """A `sql:` check item -> its CheckSpec, or issues."""
    issues = issues + _sql_issues(query)
    if label is None:
        issues.append(Issue(("name",), "a `sql:` check needs a name", "add `name: <what it checks>`, e.g. `name: no_negative_amounts`"))
    on = item.get("on", "rows")
    if on not in ("rows", "table"):
        issues.append(Issue(("on",), f"{on!r} is not rows or table", "use rows (the rows being written, the default) or table (the table after the commit)"))
    elif on == "table" and severity == "drop":
        issues.append(Issue(("severity",), "drop needs the check to run on the rows being written", "use `on: rows`, or severity error or warn"))
    if issues:
        return [], issues
    assert isinstance(query, str) and isinstance(label, str)
    spec = CheckSpec(name=label, expectation=SQL_EXPECTATION, kwargs={"unexpected_rows_query": gx_query(query)},
                     severity=severity, kind="sql", on=on, sql=query)
    return [spec], []


def _drop_issues(key: str, expectation: str, kwargs: dict[str, Any], level: str) -> list[Issue]:
    if level == "table":
        return [Issue(("severity",), f"drop quarantines failing rows, but {expectation} judges the whole table (no row fails on its own)",
                      "use severity error (blocks the commit) or warn (commits and reports)")]
    if expectation not in DROPPABLE:
        return [Issue(("severity",), f"drop is not supported for {expectation}",
                      f"use error or warn, or a check drop supports: {', '.join(DROPPABLE)}, or a `sql:` check")]
    out = []
    for arg in ("mostly", "row_condition"):
        if arg in kwargs:
            out.append(Issue((key, arg), f"`{arg}` cannot be combined with severity drop (every failing row is quarantined)", f"remove `{arg}`, or use severity error or warn"))
    return out


def parse_checks(raw: list[object]) -> tuple[list[CheckSpec], list[Issue]]:
    """The whole `checks:` list; issue locations start with the item's index."""
    specs: list[CheckSpec] = []
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    validated = ValidatedChecks.open()  # items validated before under this GE version: no GE import
    for i, item in enumerate(raw):
        if isinstance(item, CheckSpec):
            found, problems = [item], list[Issue]()
        elif (known := validated.get(item)) is not None:
            found, problems = known, []
        else:
            found, problems = parse_check(item)
            if not problems:
                validated.put(item, found)
        issues += [Issue((i, *p.loc), p.problem, p.fix) for p in problems]
        for spec in found:
            if spec.name in seen:
                issues.append(Issue((i,), f"two checks are named {spec.name!r} (items {seen[spec.name]} and {i})", "give one of them another `name:`"))
            seen[spec.name] = i
            specs.append(spec)
    validated.save()
    return specs, issues
