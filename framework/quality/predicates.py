"""Spark predicates selecting exactly the rows GE counts as unexpected, for `severity: drop`.

GE returns only a partial list of unexpected values, so quarantining needs the failing rows as a
Spark filter. Like GE's column-map expectations, NULLs are never unexpected except for the
null-ness expectations themselves (GE filters them out before judging a value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from models.quality import CheckSpec

if TYPE_CHECKING:
    from pyspark.sql import Column


def _col(spec: CheckSpec) -> Column:
    from pyspark.sql import functions as F

    assert spec.column is not None, spec
    return F.col(f"`{spec.column}`")


def _bounded(value: Column, kw: dict[str, Any], low: str, high: str) -> Column:
    """NOT (low <= value <= high), honouring GE's strict_min/strict_max."""
    from pyspark.sql import functions as F

    ok = F.lit(True)
    if kw.get(low) is not None:
        ok = ok & ((value > F.lit(kw[low])) if kw.get("strict_min") else (value >= F.lit(kw[low])))
    if kw.get(high) is not None:
        ok = ok & ((value < F.lit(kw[high])) if kw.get("strict_max") else (value <= F.lit(kw[high])))
    return ~ok


def _not_null(spec: CheckSpec) -> Column:
    return _col(spec).isNull()


def _null(spec: CheckSpec) -> Column:
    return _col(spec).isNotNull()


def _between(spec: CheckSpec) -> Column:
    return _col(spec).isNotNull() & _bounded(_col(spec), spec.kwargs, "min_value", "max_value")


def _in_set(spec: CheckSpec) -> Column:
    return _col(spec).isNotNull() & ~_col(spec).isin(list(spec.kwargs["value_set"]))


def _not_in_set(spec: CheckSpec) -> Column:
    return _col(spec).isNotNull() & _col(spec).isin(list(spec.kwargs["value_set"]))


def _regex(spec: CheckSpec) -> Column:
    # GE's default regex is "(?s).*" (matches everything); Spark's rlike is a search, like GE's.
    return _col(spec).isNotNull() & ~_col(spec).cast("string").rlike(spec.kwargs.get("regex", "(?s).*"))


def _not_regex(spec: CheckSpec) -> Column:
    return _col(spec).isNotNull() & _col(spec).cast("string").rlike(spec.kwargs["regex"])


def _length_between(spec: CheckSpec) -> Column:
    from pyspark.sql import functions as F

    length = F.length(_col(spec).cast("string"))
    return _col(spec).isNotNull() & _bounded(length, spec.kwargs, "min_value", "max_value")


def _length_equal(spec: CheckSpec) -> Column:
    from pyspark.sql import functions as F

    return _col(spec).isNotNull() & (F.length(_col(spec).cast("string")) != F.lit(spec.kwargs["value"]))


PREDICATES: dict[str, Callable[[CheckSpec], Column]] = {
    "expect_column_values_to_not_be_null": _not_null,
    "expect_column_values_to_be_null": _null,
    "expect_column_values_to_be_between": _between,
    "expect_column_values_to_be_in_set": _in_set,
    "expect_column_values_to_not_be_in_set": _not_in_set,
    "expect_column_values_to_match_regex": _regex,
    "expect_column_values_to_not_match_regex": _not_regex,
    "expect_column_value_lengths_to_be_between": _length_between,
    "expect_column_value_lengths_to_equal": _length_equal,
}


def failing(spec: CheckSpec) -> Column:
    """True for a row this (row-level, GE) check rejects; never NULL."""
    from pyspark.sql import functions as F

    return F.coalesce(PREDICATES[spec.expectation](spec), F.lit(False))
