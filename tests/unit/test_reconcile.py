"""`lake reconcile`'s parts that need no database and no Spark: the canonical row text and its
hash, the row comparison (float tolerance, NULL vs '', TOAST placeholders), the bisection over
key ranges and the re-reads that tell differences from changes in flight, run over a side held in
Python that computes the same checksums; and the configuration's errors."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.errors import ConfigError
from framework.reconcile.bisect import bisect
from framework.reconcile.canonical import (
    ColumnSpec,
    frame,
    hash32,
    hash60,
    kind_of,
    row_text,
    same_value,
)
from framework.reconcile.compare import compare_row, compare_rows
from framework.reconcile.rows import Key, OneByOne, Row, Span, Sums
from framework.reconcile.settle import settle

COLS = [ColumnSpec("id", "id", "int"), ColumnSpec("name", "name", "string"), ColumnSpec("ratio", "ratio", "float")]
PLACEHOLDER = "__debezium_unavailable_value"


class PySide(OneByOne):
    """A table held in Python: key -> column texts, the coordinate the key itself (an integer
    key) or the hash of its text; the checksums by the rules the SQL and Spark sides follow.
    Counts the queries and rows read, as the database side does."""

    def __init__(self, rows: dict[Key, tuple[str | None, ...]], by_value: bool = True) -> None:
        self.data, self.by_value = dict(rows), by_value
        self.queries = self.fetched = 0
        self._hashes: dict[Key, int] = {}

    def coordinate(self, key: Key) -> int:
        return int(key[0] or 0) if self.by_value else hash32(row_text(key))

    def _in(self, lo: int, hi: int) -> dict[Key, Row]:
        return {k: Row(c, v) for k, v in self.data.items() if lo <= (c := self.coordinate(k)) < hi}

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        self.queries += 1
        out: Sums = {}
        for k, row in self._in(lo, hi).items():
            n, s = out.get((row.coordinate - lo) // width, (0, 0))
            if k not in self._hashes:
                self._hashes[k] = hash60(row_text(row.values))
            out[(row.coordinate - lo) // width] = (n + 1, s + self._hashes[k])
        return out

    def rows(self, lo: int, hi: int) -> dict[Key, Row]:
        got = self._in(lo, hi)
        self.fetched += len(got)
        return got

    def keyed(self, keys: Sequence[Key]) -> dict[Key, Row]:
        return {k: Row(self.coordinate(k), self.data[k]) for k in keys if k in self.data}


def _table(n: int) -> dict[Key, tuple[str | None, ...]]:
    return {(str(i),): (str(i), f"name {i}" if i % 7 else None, f"{i / 3:.6f}") for i in range(n)}


def _diffs(a: PySide, b: PySide, lo: int, hi: int, segments: int = 16, fetch_below: int = 8) -> list[tuple[Key, str]]:
    f = bisect(a, b, lo, hi, segments=segments, fetch_below=fetch_below)
    return [(d.key, d.kind) for d in compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)]


# --- canonical text -------------------------------------------------------------------------------


def test_null_empty_and_separators_give_distinct_row_texts() -> None:
    assert len({row_text((None,)), row_text(("",)), row_text(("~",)), row_text(("0:",))}) == 4
    assert row_text(("a|1:b",)) != row_text(("a", "b"))
    assert frame("李🚀") == "2:李🚀"  # characters, as CHAR_LENGTH, char_length and Spark's length count them


@given(st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=4), st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=4))
def test_row_text_is_injective(a: list[str | None], b: list[str | None]) -> None:
    assert (row_text(tuple(a)) == row_text(tuple(b))) == (a == b)


def test_hash60_is_the_low_60_bits_of_md5() -> None:
    text = row_text(("1", "Zoë", None))
    digest = hashlib.md5(text.encode()).digest()
    assert hash60(text) == int.from_bytes(digest, "big") & ((1 << 60) - 1)
    assert 0 <= hash32(text) < 1 << 32


def test_kinds_follow_the_ods_type_and_the_source_type() -> None:
    assert kind_of("smallint", "tinyint") == ("int", 0)  # MariaDB TINYINT(1) as Debezium reads it by default
    assert kind_of("boolean", "tinyint") == ("bool", 0)
    assert kind_of("decimal(12,4)", "decimal") == ("decimal", 4)
    assert kind_of("string", "time") == ("time", 0) and kind_of("string", "varchar") == ("string", 0)
    assert kind_of("timestamp", "timestamp with time zone") == ("timestamp", 0)


def test_floats_compare_within_the_stated_digits_the_rest_exactly() -> None:
    assert same_value("float", "0.333333", "0.333334", 6)  # a rounding edge: one unit of the last digit
    assert not same_value("float", "0.333333", "0.333335", 6)
    assert same_value("float", "123456789012.0", "123456789012.1", 6)  # relative for large values
    assert not same_value("decimal", "1.0000", "1.00000", 6) and not same_value("string", "", None, 6)


def test_a_toast_placeholder_in_ods_is_unknown_not_a_difference() -> None:
    src, ods = Row(1, ("1", "a long text", "0.5")), Row(1, ("1", PLACEHOLDER, "0.5"))
    assert compare_row(COLS, ("1",), src, ods, float_digits=6, placeholder=PLACEHOLDER).kind == "unknown"  # type: ignore[union-attr]
    ods2 = Row(1, ("1", PLACEHOLDER, "0.7"))
    d = compare_row(COLS, ("1",), src, ods2, float_digits=6, placeholder=PLACEHOLDER)
    assert d is not None and (d.kind, d.columns) == ("changed", ("ratio",))


# --- bisection ----------------------------------------------------------------------------------


def test_equal_tables_cost_one_checksum_query_per_side() -> None:
    a, b = PySide(_table(10_000)), PySide(_table(10_000))
    assert _diffs(a, b, 0, 10_000) == []
    assert (a.queries, b.queries, a.fetched) == (1, 1, 0)


def test_bisection_finds_exactly_the_differing_keys_reading_few_rows() -> None:
    rows = _table(30_000)
    ods = dict(rows)
    ods[("12345",)] = ("12345", "changed", ods[("12345",)][2])
    del ods[("777",)]
    ods[("30500",)] = ("30500", "extra", None)
    ods[("29999",)] = ("29999", "", ods[("29999",)][2])  # '' where the source has a value
    ods[("42",)] = ("42", None, "14.000001")  # a float one digit off: equal within the tolerance
    for i in range(20_000, 20_010):  # ten neighbours changed
        ods[(str(i),)] = (str(i), "x", ods[(str(i),)][2])
    a, b = PySide(rows), PySide(ods)
    found = _diffs(a, b, 0, 30_501)
    expected = {("12345",): "changed", ("777",): "missing", ("30500",): "extra", ("29999",): "changed",
                **{(str(i),): "changed" for i in range(20_000, 20_010)}}
    assert dict(found) == expected
    assert a.fetched < 0.01 * len(rows), a.fetched  # rows read: a few leaf ranges, not the table


def test_bisection_over_hashed_keys_for_string_and_composite_keys() -> None:
    rows = {(f"c{i % 13}", str(i)): (f"c{i % 13}", str(i), f"l{i}") for i in range(5_000)}
    ods = dict(rows)
    ods[("c3", "3")] = ("c3", "3", "broken")
    del ods[("c0", "13")]
    a, b = PySide(rows, by_value=False), PySide(ods, by_value=False)
    cols = [ColumnSpec("code", "code", "string"), ColumnSpec("n", "n", "int"), ColumnSpec("label", "label", "string")]
    f = bisect(a, b, 0, 1 << 32, segments=16, fetch_below=8)
    diffs = compare_rows(cols, {k[:2]: v for k, v in f.source.items()}, {k[:2]: v for k, v in f.ods.items()}, float_digits=6, placeholder="?")
    assert [(d.key, d.kind, d.columns) for d in diffs] == [(("c0", "13"), "missing", ()), (("c3", "3"), "changed", ("label",))]


class Observed(PySide):
    """A side that calls `_seen()` before each single-range checksum or row read."""

    def _seen(self) -> None:
        pass

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        self._seen()
        return super().checksums(lo, hi, width)

    def rows(self, lo: int, hi: int) -> dict[Key, Row]:
        self._seen()
        return super().rows(lo, hi)


class Meeting(Observed):
    """A side whose checksum and row reads wait (up to 5 s) for the other side's to start: the
    bisection must run the two sides of a step at the same time, or each wait times out."""

    def __init__(self, rows: dict[Key, tuple[str | None, ...]], mine: threading.Event, theirs: threading.Event) -> None:
        super().__init__(rows)
        self.mine, self.theirs = mine, theirs
        self.met: list[bool] = []

    def _seen(self) -> None:
        self.mine.set()
        self.met.append(self.theirs.wait(5))


def test_both_sides_of_a_step_run_at_once_and_ods_keys_beyond_the_sources_bounds_are_compared() -> None:
    """The database's query and Spark's side of each step overlap (a step costs the slower side);
    the first range is the database's bounds, and ODS keys outside it come back through `more`."""
    source = _table(50)
    ods = {**source, ("70",): ("70", "late", None)}  # beyond the source's bounds: extra
    ods[("7",)] = ("7", "broken", source[("7",)][2])
    s_ev, o_ev = threading.Event(), threading.Event()
    a, b = Meeting(source, s_ev, o_ev), Meeting(ods, o_ev, s_ev)
    f = bisect(a, b, 0, 50, segments=4, fetch_below=4, more=lambda: [(50, 71)])
    assert a.met and b.met and all(a.met) and all(b.met)
    assert [(d.key, d.kind) for d in compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)] == [
        (("7",), "changed"), (("70",), "extra")]
    assert (f.source_rows, f.ods_rows) == (50, 51)


class Batched(Observed):
    """Counts the calls the bisection makes to a side (a batch is one call, however many ranges
    it holds; a single range asked on its own is one call too)."""

    def __init__(self, rows: dict[Key, tuple[str | None, ...]]) -> None:
        super().__init__(rows)
        self.calls = 0
        self._batch = False

    def _seen(self) -> None:
        if not self._batch:
            self.calls += 1

    def checksums_many(self, spans: Sequence[Span]) -> list[Sums]:
        self.calls, self._batch = self.calls + 1, True
        try:
            return super().checksums_many(spans)
        finally:
            self._batch = False

    def rows_many(self, ranges: Sequence[tuple[int, int]]) -> dict[Key, Row]:
        self.calls, self._batch = self.calls + 1, True
        try:
            return super().rows_many(ranges)
        finally:
            self._batch = False


def test_each_level_of_the_bisection_is_one_call_per_side() -> None:
    """Ten scattered differences in 20,000 rows: the ranges compared number dozens, the calls
    to each side one per level (and one for the rows read), and exactly the ten keys are found."""
    source = _table(20_000)
    ods = dict(source)
    broken = [(str(i),) for i in range(7, 20_000, 1_993)][:10]
    for k in broken:
        ods[k] = (k[0], "broken", source[k][2])
    a, b = Batched(source), Batched(ods)
    f = bisect(a, b, 0, 20_000, segments=8, fetch_below=8)
    found = [d.key for d in compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)]
    assert sorted(found) == sorted(broken)
    assert f.ranges > 3 * b.calls and a.calls == b.calls <= 8


def test_a_range_one_coordinate_wide_is_read_row_by_row() -> None:
    a, b = PySide({("5",): ("5", "a", None)}), PySide({("5",): ("5", "b", None)})
    assert _diffs(a, b, 0, 10, segments=2, fetch_below=0) == [(("5",), "changed")]


# --- differences that persist vs changes in flight -----------------------------------------------


class Moving(PySide):
    """A side whose rows change at given re-reads: `script[i]` is applied before the i-th re-read."""

    def __init__(self, rows: dict[Key, tuple[str | None, ...]], script: dict[int, Callable[[dict[Key, tuple[str | None, ...]]], None]]) -> None:
        super().__init__(rows)
        self.script, self.reads = script, 0

    def keyed(self, keys: Sequence[Key]) -> dict[Key, Row]:
        self.reads += 1
        if self.reads in self.script:
            self.script[self.reads](self.data)
        return super().keyed(keys)


def test_only_differences_that_persist_are_reported() -> None:
    base = _table(100)
    source = dict(base)
    source[("1",)] = ("1", "new", base[("1",)][2])  # in flight: ODS takes it at the 1st re-read
    source[("2",)] = ("2", "real", base[("2",)][2])  # a real difference: nobody changes it
    source[("3",)] = ("3", "busy", base[("3",)][2])  # keeps changing on the source
    src = Moving(source, {i: (lambda d, i=i: d.__setitem__(("3",), ("3", f"busy{i}", None))) for i in range(1, 100)})
    ods = Moving(base, {1: lambda d: d.__setitem__(("1",), source[("1",)])})
    f = bisect(src, ods, 0, 100, segments=4, fetch_below=100)
    first = compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)
    assert [d.key for d in first] == [("1",), ("2",), ("3",)]
    ticks = iter(range(1000))
    s = settle(src, ods, COLS, first, f.source, f.ods, settle_seconds=0, timeout=5, float_digits=6, placeholder=PLACEHOLDER,
               sleep=lambda _s: None, clock=lambda: float(next(ticks)))
    assert [d.key for d, _, _ in s.differences] == [("2",)]
    assert s.in_flight == [("3",)] and s.rounds >= 3


def test_with_positions_a_change_ingest_takes_late_is_in_flight_however_long_it_lags() -> None:
    """The stream lags longer than any pause: ODS takes key 1's change only while reconcile waits
    for it to reach the database's position. Re-reading after that wait, key 1 is equal (it was in
    flight) and the real difference (key 2) is found; nothing sleeps `settle_seconds`. Re-reading
    after a pause shorter than the lag instead, key 1 would be a false difference."""
    base = _table(50)
    source = dict(base)
    source[("1",)] = ("1", "late", base[("1",)][2])
    source[("2",)] = ("2", "real", base[("2",)][2])

    def run(with_positions: bool) -> list[Key]:
        src, ods = PySide(source), PySide(base)
        f = bisect(src, ods, 0, 50, segments=4, fetch_below=50)
        first = compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)

        def catch_up(_seconds: float) -> str | None:  # ingest reaches the position: it applies the change
            ods.data[("1",)] = source[("1",)]
            return None

        def no_sleep(_s: float) -> None:
            assert not with_positions, "with positions to wait for, nothing sleeps settle_seconds"

        s = settle(src, ods, COLS, first, f.source, f.ods, settle_seconds=5, timeout=60, float_digits=6, placeholder=PLACEHOLDER,
                   catch_up=catch_up if with_positions else None, sleep=no_sleep)
        assert not s.in_flight and s.caught_up == (1 if with_positions else 0)
        return [d.key for d, _, _ in s.differences]

    assert run(with_positions=True) == [("2",)]
    assert run(with_positions=False) == [("1",), ("2",)]  # the lag outlasted settle_seconds: a false difference


def test_when_the_stream_does_not_reach_the_position_keys_are_in_flight_not_differences() -> None:
    base = _table(20)
    source = {**base, ("5",): ("5", "changed", base[("5",)][2])}
    src, ods = PySide(source), PySide(base)
    f = bisect(src, ods, 0, 20, segments=4, fetch_below=20)
    first = compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder=PLACEHOLDER)
    s = settle(src, ods, COLS, first, f.source, f.ods, settle_seconds=0, timeout=5, float_digits=6, placeholder=PLACEHOLDER,
               catch_up=lambda _s: "the connector c had not reached the database's position mysql-bin.000001:99")
    assert s.differences == [] and s.in_flight == [("5",)] and "had not reached" in s.waited


# --- configuration --------------------------------------------------------------------------------


def _project(root: Path, reconcile: str) -> Path:
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: p\n" + reconcile)
    (root / "layers" / "ods" / "shop.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    return root


def test_a_password_written_into_lake_yaml_is_refused(tmp_path: Path) -> None:
    from framework.project.config import load_project

    root = _project(tmp_path, "reconcile:\n  sources:\n    shop: {dialect: mariadb, host: db, user: u, password: hunter2}\n")
    with pytest.raises(ConfigError, match=r"reconcile\.sources\.shop\.password.*\n.*fix: write `password: \$\{SHOP_DB_PASSWORD\}`"):
        load_project(root)


def test_settings_from_variables_and_a_missing_database_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from framework.project.config import load_project
    from framework.reconcile.target import target_of

    monkeypatch.setenv("SHOP_PW", "s3cret")
    root = _project(tmp_path, "reconcile:\n  sources:\n    other: {dialect: postgres, host: db, user: u, password: '${SHOP_PW}'}\n")
    project = load_project(root)
    assert project.config.reconcile is not None and project.config.reconcile.sources["other"].password == "s3cret"
    with pytest.raises(ConfigError, match=r"lake\.yaml: reconcile\.sources\.shop: no connection settings.*\n\s+fix: add them"):
        target_of(project, project.ods_table("ods.orders"))


def test_a_schedule_runs_reconcile() -> None:
    from framework.ops.schedule import lake_commands
    from models.schedule import ScheduleConfig

    s = ScheduleConfig(name="nightly", cron="0 4 * * *", what="reconcile", select=["ods.orders"], repair=True)
    assert lake_commands(s) == [["reconcile", "ods.orders", "--repair"]]
    with pytest.raises(ValueError, match="ODS tables"):
        ScheduleConfig(name="x", cron="0 4 * * *", what="reconcile", select=["dws.agg"])


def test_a_difference_alerts_reconcile_failed_until_a_reconcile_finds_it_equal() -> None:
    from framework.observe.incidents import problems, resolves
    from models.ops import AlertsConfig
    from models.reconcile import TableReconcile
    from models.records import Incident, RunRecord

    def run(status: str) -> RunRecord:
        return RunRecord(run_id="r1", command="reconcile", args=[], started_at="2026-01-01T00:00:00Z", status="failed" if status != "equal" else "ok",
                         reconciled=[TableReconcile(table="ods.orders", source="shop.orders", status=status, reason="1 changed")])  # type: ignore[arg-type]

    cfg = AlertsConfig.model_validate({"targets": [{"kind": "command", "command": ["true"]}]})
    (p,) = problems(run("differs"), cfg)
    assert (p.event, p.subject) == ("reconcile_failed", "ods.orders") and "--repair" in p.fix
    inc = Incident(key="reconcile_failed ods.orders", event="reconcile_failed", subject="ods.orders", reason=p.reason, fix=p.fix,
                   opened_at="2026-01-01T00:00:00Z", run_id="r1")
    assert resolves(run("equal"), inc, cfg) and not resolves(run("differs"), inc, cfg)
