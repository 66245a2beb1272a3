"""What both sides of `lake reconcile` hand the bisection: per sub-range (count, hash sum), and
rows as their columns' canonical texts keyed by the key's texts; and the `Side` protocol the
source database (framework/reconcile/source.py) and the ODS table (framework/reconcile/ods.py)
implement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

Sums = dict[int, tuple[int, int]]  # sub-range number -> (rows, sum of their 60-bit hashes)
Key = tuple[str | None, ...]  # a key's columns' canonical texts


@dataclass(frozen=True)
class Row:
    """One row: its range coordinate and its columns' canonical texts (None: NULL)."""

    coordinate: int
    values: tuple[str | None, ...]


class Side(Protocol):
    """One side of the comparison, over the compared columns (keys among them)."""

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        """(rows, hash sum) of each sub-range b: [lo + b*width, lo + (b+1)*width) within [lo, hi)."""
        ...

    def rows(self, lo: int, hi: int) -> dict[Key, Row]:
        """Every row in [lo, hi)."""
        ...

    def keyed(self, keys: Sequence[Key]) -> dict[Key, Row]:
        """The rows of these keys as they are now (a fresh read)."""
        ...
