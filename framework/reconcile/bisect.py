"""Bisection of `lake reconcile`: checksums over key ranges on both sides, each mismatching range
split again (one aggregate query per range and side), down to ranges small enough to read row by
row; then the rows that differ. The equal ranges cost one query each, whatever their size.

The two sides of each step run at the same time: the database's query on a thread of its own
while Spark computes the ODS side (both wait on sockets, not on Python), so a step costs the
slower side, not the sum. At the first step that is most of the run: the database scans the
table while Spark reads the ODS table and caches its hashes."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from framework.reconcile.rows import Key, Row, Side


@dataclass
class Found:
    """What the bisection read at its ends: the rows of every mismatching leaf range on each side."""

    source: dict[Key, Row] = field(default_factory=dict)
    ods: dict[Key, Row] = field(default_factory=dict)
    ranges: int = 0  # ranges compared by checksum
    leaves: int = 0  # ranges read row by row
    source_rows: int = 0  # rows in the whole range (the first level's counts)
    ods_rows: int = 0


def bisect(source: Side, ods: Side, lo: int, hi: int, *, segments: int, fetch_below: int,
           more: Callable[[], list[tuple[int, int]]] | None = None) -> Found:
    """Compare [lo, hi) of both sides: split it into `segments` sub-ranges, compare each one's
    (rows, hash sum), and go on into those that differ, reading a sub-range row by row once it
    holds at most `fetch_below` rows on either side (or is one coordinate wide).

    Level by level: every range of a level goes to each side at once (`checksums_many`: for ODS
    one Spark job per level, not one per range), and so do the level's ranges read row by row.
    `more`, called once after the first level: further top-level ranges to compare (the ODS keys
    outside the database's bounds, known only once ODS has been read)."""
    found = Found()
    level: list[tuple[int, int, bool]] = [(lo, hi, True)]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lake-reconcile-source") as pool:
        while level:
            spans = [(a, b, max(1, -(-(b - a) // segments))) for a, b, _ in level]
            asked = pool.submit(source.checksums_many, spans)
            try:
                theirs_all = ods.checksums_many(spans)
            finally:
                mine_all = asked.result()
            found.ranges += len(spans)
            deeper: list[tuple[int, int, bool]] = []
            leaves: list[tuple[int, int]] = []
            for (a, b, width), (_, _, top), mine, theirs in zip(spans, level, mine_all, theirs_all, strict=True):
                if top:
                    found.source_rows += sum(n for n, _ in mine.values())
                    found.ods_rows += sum(n for n, _ in theirs.values())
                for bucket in sorted(mine.keys() | theirs.keys()):
                    x, y = mine.get(bucket, (0, 0)), theirs.get(bucket, (0, 0))
                    if x == y:
                        continue
                    s_lo = a + bucket * width
                    s_hi = min(b, s_lo + width)
                    if max(x[0], y[0]) <= fetch_below or s_hi - s_lo <= 1:
                        leaves.append((s_lo, s_hi))
                    else:
                        deeper.append((s_lo, s_hi, False))
            if leaves:
                found.leaves += len(leaves)
                rows = pool.submit(source.rows_many, leaves)
                try:
                    found.ods.update(ods.rows_many(leaves))
                finally:
                    found.source.update(rows.result())
            if more is not None:
                deeper += [(x, y, True) for x, y in more() if x < y]
                more = None
            level = deeper
    return found
