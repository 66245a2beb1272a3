"""The state an aggregate model keeps per group, described once.

An aggregate model's rows carry, beside their visible columns, the running state the next
incremental build adds to (strategies/aggregate.py merges it, holders.py says which holder counts
to trust, hidden.py keeps the state of hidden groups). Per group: `ROWS`, its row count; per
aggregate call `i` (`Aggregate.index`), the columns of `StateColumns`:

- `sum`     `_lake_s<i>`  SUM and AVG: the sum of the non-NULL values
- `count`   `_lake_n<i>`  every call but COUNT(*): how many values are not NULL
- `extreme` `_lake_m<i>`  MIN and MAX: the extreme value
- `holders` `_lake_c<i>`  MIN and MAX: how many rows hold it (NULL: unknown, holders.py)

Visible values are read from these (`visible_sql`); an AVG divides its sum by its count as
Spark's Average does, decimal sums by a DECIMAL(20,0) count and others by a DOUBLE, which
depends on the sum's type: `average_sql` gives that expression as the column `avg` (`_lake_a<i>`)
the finalize step computes from the typed state before the model's expressions read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROWS = "_lake_rows"  # rows of the group: 0 deletes it
KEY = "_lake_key"  # the row's Hudi record key
_HOLDERS = re.compile(r"_lake_c\d+")


@dataclass(frozen=True)
class StateColumns:
    """The state columns of one aggregate call."""

    index: int
    func: str  # sum | count | count_star | avg | min | max

    @property
    def sum(self) -> str:
        return f"_lake_s{self.index}"

    @property
    def count(self) -> str:
        return f"_lake_n{self.index}"

    @property
    def extreme(self) -> str:
        return f"_lake_m{self.index}"

    @property
    def holders(self) -> str:
        return f"_lake_c{self.index}"

    @property
    def avg(self) -> str:
        return f"_lake_a{self.index}"

    @property
    def stored(self) -> list[str]:
        """The columns kept in the table for this call."""
        if self.func == "count_star":
            return []
        if self.func == "count":
            return [self.count]
        if self.func in ("sum", "avg"):
            return [self.sum, self.count]
        return [self.extreme, self.count, self.holders]

    def visible_sql(self) -> str:
        """The call's value, from the state (NULL when the group has no non-NULL value)."""
        if self.func == "count_star":
            return ROWS
        if self.func == "count":
            return self.count
        if self.func == "sum":
            return f"(CASE WHEN {self.count} > 0 THEN {self.sum} END)"
        if self.func == "avg":
            return self.avg
        return f"(CASE WHEN {self.count} > 0 THEN {self.extreme} END)"

    def average_sql(self, sum_type: str) -> str:
        """An AVG's value, as Spark's Average computes it for a sum of `sum_type`."""
        divisor = "DECIMAL(20,0)" if sum_type.startswith("decimal") else "DOUBLE"
        return f"(CASE WHEN {self.count} > 0 THEN {self.sum} / CAST({self.count} AS {divisor}) END)"


def is_holder_count(column: str) -> bool:
    """A MIN/MAX holder-count state column."""
    return _HOLDERS.fullmatch(column) is not None
