"""Bisection of `lake reconcile`: checksums over key ranges on both sides, each mismatching range
split again (one aggregate query per range and side), down to ranges small enough to read row by
row; then the rows that differ. The equal ranges cost one query each, whatever their size."""

from __future__ import annotations

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


def bisect(source: Side, ods: Side, lo: int, hi: int, *, segments: int, fetch_below: int) -> Found:
    """Compare [lo, hi) of both sides: split it into `segments` sub-ranges, compare each one's
    (rows, hash sum), and go on into those that differ, reading a sub-range row by row once it
    holds at most `fetch_below` rows on either side (or is one coordinate wide).

    """
    found = Found()
    pending = [(lo, hi)]
    first = True
    while pending:
        a, b = pending.pop()
        width = max(1, -(-(b - a) // segments))
        mine, theirs = source.checksums(a, b, width), ods.checksums(a, b, width)
        found.ranges += 1
        if first:
            found.source_rows = sum(n for n, _ in mine.values())
            found.ods_rows = sum(n for n, _ in theirs.values())
            first = False
        for bucket in sorted(mine.keys() | theirs.keys()):
            x, y = mine.get(bucket, (0, 0)), theirs.get(bucket, (0, 0))
            if x == y:
                continue
            s_lo = a + bucket * width
            s_hi = min(b, s_lo + width)
            if max(x[0], y[0]) <= fetch_below or s_hi - s_lo <= 1:
                found.leaves += 1
                found.source.update(source.rows(s_lo, s_hi))
                found.ods.update(ods.rows(s_lo, s_hi))
            else:
                pending.append((s_lo, s_hi))
    return found
