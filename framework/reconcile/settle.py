"""Differences that persist, told apart from changes in flight: a key whose rows differ is read
again on both sides, and only a key that still differs with neither side changed in between is a
difference. Between two reads lake waits until ODS has taken every change the database committed
before the second (framework/reconcile/caught_up.py: the connector's offset and ODS's Kafka
checkpoint against the database's position), or, with no positions to compare, for
`settle_seconds`. A key that keeps changing is re-read until the timeout, then said to be in
flight (not a difference): the source moved after the position ODS had reached."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.compare import KeyDiff, compare_row
from framework.reconcile.rows import Key, Row, Side


@dataclass
class Settled:
    """The keys found to differ, each with its rows as last read; the keys equal except for
    unknown (placeholder) columns; the keys still changing at the timeout; the re-reads made."""

    differences: list[tuple[KeyDiff, Row | None, Row | None]] = field(default_factory=list)
    unknown: list[Key] = field(default_factory=list)
    in_flight: list[Key] = field(default_factory=list)
    rounds: int = 0
    rechecked: int = 0  # keys that differed at the first read, re-read
    caught_up: int = 0  # rounds re-read once ODS had reached the database's position
    waited: str = ""  # why the last wait for the stream ended without it (the keys left are in flight)


def settle(source: Side, ods: Side, cols: Sequence[ColumnSpec], first: Sequence[KeyDiff], source_rows: dict[Key, Row],
           ods_rows: dict[Key, Row], *, settle_seconds: float, timeout: float, float_digits: int, placeholder: str,
           catch_up: Callable[[float], str | None] | None = None,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> Settled:
    """Re-read the keys of `first` (found in `source_rows` / `ods_rows`) until each is equal, or
    differs the same way twice in a row, or `timeout` seconds have passed. `catch_up(seconds)`:
    wait until ODS has reached the database's position now; None once it has, else why not."""
    out = Settled(unknown=[d.key for d in first if d.kind == "unknown"])
    pending = [d.key for d in first if d.kind != "unknown"]
    out.rechecked = len(pending)
    prev_s: Mapping[Key, Row | None] = {k: source_rows.get(k) for k in pending}
    prev_o: Mapping[Key, Row | None] = {k: ods_rows.get(k) for k in pending}
    deadline = clock() + timeout
    while pending:
        if catch_up is None:
            sleep(settle_seconds)
        else:
            why = catch_up(max(0.0, deadline - clock()))
            if why is not None:  # no exact answer in time: in flight, never a guessed difference
                out.waited = why
                break
            out.caught_up += 1
        now_s, now_o = source.keyed(pending), ods.keyed(pending)
        out.rounds += 1
        still = []
        for k in pending:
            s, o = now_s.get(k), now_o.get(k)
            d = compare_row(cols, k, s, o, float_digits=float_digits, placeholder=placeholder)
            if d is None:
                continue
            if d.kind == "unknown":
                out.unknown.append(k)
            elif s == prev_s.get(k) and o == prev_o.get(k):
                out.differences.append((d, s, o))
            else:
                still.append(k)
        pending, prev_s, prev_o = still, now_s, now_o
        if clock() >= deadline:
            break
    out.in_flight = pending
    return out
