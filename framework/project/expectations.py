"""Great Expectations' own catalogue of expectation classes, read for config validation (no Spark).

Names and arguments are GE's, looked up in GE's registry and checked against each class's own
pydantic fields, so a check declared in YAML fails at load time exactly where GE would fail at run
time. great_expectations is imported lazily (3-5 s): only projects that declare checks pay, and
only for checks not validated before (framework/project/check_cache.py).
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from great_expectations.expectations import Expectation

Level = Literal["row", "table"]

# Fields every GE expectation has that lake sets itself (or that make no sense in YAML).
# `severity` is GE's own field; lake's `severity:` sits beside the expectation, not inside it.
INTERNAL_FIELDS = frozenset(
    {"id", "meta", "notes", "result_format", "description", "catch_exceptions", "rendered_content", "severity", "windows", "batch_id"}
)
# GE's custom-query expectation is declared with lake's `sql:` form (it needs `{{ this }}`).
HIDDEN = frozenset({"unexpected_rows_expectation"})

# Column-map expectations whose verdict on a row depends on other rows: they judge the table.
_MAP_BUT_TABLE = frozenset(
    {
        "expect_column_values_to_be_unique",
        "expect_compound_columns_to_be_unique",
        "expect_column_values_to_be_increasing",
        "expect_column_values_to_be_decreasing",
        "expect_column_value_z_scores_to_be_less_than",
        "expect_column_values_to_not_be_outliers",
    }
)


def _gx_env() -> None:
    """GE sends usage analytics unless told not to; lake never phones home."""
    import os

    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


@cache
def expectation_names() -> tuple[str, ...]:
    """Every expectation type GE registers (snake_case), minus those lake declares its own way."""
    _gx_env()
    from great_expectations.expectations.registry import list_registered_expectation_implementations

    return tuple(sorted(n for n in list_registered_expectation_implementations() if n not in HIDDEN))


def expectation_class(name: str) -> type[Expectation] | None:
    """GE's class for `name` (e.g. expect_column_values_to_not_be_null), or None."""
    if name not in expectation_names():
        return None
    from great_expectations.expectations.registry import get_expectation_impl

    return get_expectation_impl(name)


def suggest(name: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def level_of(name: str) -> Level:
    """Row-level: each row passes or fails on its own (GE's map expectations, except those whose
    verdict depends on other rows). Everything else — aggregates, row counts, uniqueness — judges
    the table."""
    from great_expectations.expectations.expectation import (
        ColumnMapExpectation,
        ColumnPairMapExpectation,
        MulticolumnMapExpectation,
    )

    cls = expectation_class(name)
    if cls is None or name in _MAP_BUT_TABLE:
        return "table"
    if issubclass(cls, (ColumnMapExpectation, ColumnPairMapExpectation, MulticolumnMapExpectation)):
        return "row"
    return "table"


def argument_names(name: str) -> tuple[list[str], list[str]]:
    """(required, optional) user arguments of expectation `name`."""
    cls = expectation_class(name)
    assert cls is not None
    required: list[str] = []
    optional: list[str] = []
    for field_name, f in cls.__fields__.items():
        if field_name in INTERNAL_FIELDS:
            continue
        (required if f.required else optional).append(field_name)
    return required, optional


def argument_problems(name: str, kwargs: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Problems with `kwargs` for expectation `name`, as (argument, problem, fix); [] if none.

    Unknown and missing arguments are found from the class's fields; wrong values by building the
    GE expectation itself (its own pydantic validation), which needs no Spark.
    """
    required, optional = argument_names(name)
    allowed = required + optional
    out: list[tuple[str, str, str]] = []
    for arg in kwargs:
        if arg in INTERNAL_FIELDS:
            fix = "put `severity:` beside the expectation, not inside its arguments" if arg == "severity" else f"remove `{arg}`; lake sets it"
            out.append((arg, f"`{arg}` is not an argument users set", fix))
        elif arg not in allowed:
            close = suggest(arg, allowed)
            hint = f"did you mean `{close}`? " if close else ""
            out.append((arg, f"{name} has no argument `{arg}`", f"{hint}arguments: {', '.join(allowed)}"))
    for arg in required:
        if arg not in kwargs:
            out.append((arg, f"{name} needs the argument `{arg}`", f"add `{arg}: ...` (required: {', '.join(required)})"))
    if out:
        return out
    from great_expectations.compatibility.pydantic import ValidationError

    cls = expectation_class(name)
    assert cls is not None
    try:
        cls(**kwargs)
    except ValidationError as e:
        # Union fields report one error per alternative; group them into one line per argument.
        by_arg: dict[str, list[str]] = {}
        for err in e.errors():
            arg = str(err["loc"][0]) if err["loc"] and err["loc"][0] != "__root__" else name
            by_arg.setdefault(arg, []).append(err["msg"])
        if len(by_arg) > 1:
            by_arg.pop(name, None)  # a model-level complaint caused by a field already reported
        for arg, msgs in by_arg.items():
            what = " or ".join(dict.fromkeys(msgs))
            fix = f"give `{arg}` a value GE accepts for {name}" if arg != name else "fix the arguments"
            out.append((arg, f"invalid `{arg}`: {what}", fix))
    except (ValueError, TypeError) as e:
        out.append((name, f"invalid arguments: {e}", f"see GE's documentation of {name}"))
    return out
