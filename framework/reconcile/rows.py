"""What both sides of `lake reconcile` hand the bisection: per sub-range (count, hash sum), and
rows as their columns' canonical texts keyed by the key's texts; and the `Side` protocol the
source database (framework/reconcile/source.py) and the ODS table (framework/reconcile/ods.py)
implement."""

from __future__ import annotations

from abc import ABC, abstractmethod
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


Span = tuple[int, int, int]  # [lo, hi) split into sub-ranges `width` wide


class Side(Protocol):
    """One side of the comparison, over the compared columns (keys among them)."""

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        """(rows, hash sum) of each sub-range b: [lo + b*width, lo + (b+1)*width) within [lo, hi)."""
        ...

    def checksums_many(self, spans: Sequence[Span]) -> list[Sums]:
        """`checksums` of each span (disjoint ranges), in their order."""
        ...

    def rows(self, lo: int, hi: int) -> dict[Key, Row]:
        """Every row in [lo, hi)."""
        ...

    def rows_many(self, ranges: Sequence[tuple[int, int]]) -> dict[Key, Row]:
        """Every row in any of these (disjoint) ranges."""
        ...

    def keyed(self, keys: Sequence[Key]) -> dict[Key, Row]:
        """The rows of these keys as they are now (a fresh read)."""
        ...


class OneByOne(ABC):
    """`checksums_many` and `rows_many` as one `checksums` / `rows` per range: for a side where
    a range costs one cheap query (the database's index range scans)."""

    @abstractmethod
    def checksums(self, lo: int, hi: int, width: int) -> Sums: ...

    @abstractmethod
    def rows(self, lo: int, hi: int) -> dict[Key, Row]: ...

    def checksums_many(self, spans: Sequence[Span]) -> list[Sums]:
        return [self.checksums(lo, hi, width) for lo, hi, width in spans]

    def rows_many(self, ranges: Sequence[tuple[int, int]]) -> dict[Key, Row]:
        out: dict[Key, Row] = {}
        for lo, hi in ranges:
            out.update(self.rows(lo, hi))
        return out
