"""Every column type the MySQL/MariaDB and PostgreSQL Debezium connectors emit, as their JSON
converter writes it (schemas.enable=true), with the value each must read back as.

The connectors' documented type mappings (Debezium's MySQL/MariaDB and PostgreSQL connector pages,
"Data type mappings"): int8/int16/int32/int64, float/double, boolean, string, bytes
(binary.handling.mode=bytes: base64 in JSON), DECIMAL in the three `decimal.handling.mode`s
(precise: Connect Decimal as base64 of the unscaled value; string; double), BIGINT UNSIGNED in
precise mode (Decimal(20,0)), the io.debezium.time types (Date, Time, MicroTime, NanoTime,
Timestamp, MicroTimestamp, NanoTimestamp, ZonedTimestamp, ZonedTime, Year, MicroDuration,
Interval), the Kafka Connect logical Date/Time/Timestamp, Enum, EnumSet, Json, Uuid, Xml, Bits,
VariableScaleDecimal (PostgreSQL NUMERIC without scale), arrays (PostgreSQL) and geometry structs.

The expected values are computed here from the wire values by arithmetic of their own (epoch
days, micros, hex), never by lake's decoders: they are the oracle. `READ` says how a test reads a
column back so that every engine gives comparable Python values (micros for timestamps, epoch
days for dates, hex for binary, text for decimals, parsed JSON for nested values).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
MIN_US, MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999  # 0001-01-01 .. 9999-12-31T23:59:59.999999


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unscaled_b64(value: Decimal, scale: int) -> str:
    """Kafka Connect Decimal: base64 of the minimal big-endian two's-complement unscaled value."""
    exact = Context(prec=100)
    unscaled = int(value.scaleb(scale, context=exact))
    assert Decimal(unscaled).scaleb(-scale, context=exact) == value
    return b64(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True))


def _decimal(p: int, s: int) -> dict[str, Any]:
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": str(s), "connect.decimal.precision": str(p)}}


def _named(typ: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"type": typ, "name": name, "version": 1, **extra}


def _time_text(micros: int) -> str:
    s, us = divmod(micros, 1_000_000)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}.{us:06d}"


@dataclass(frozen=True)
class Case:
    """One column: its Connect field schema, how it is read back, and (wire, expected) pairs;
    every case has a NULL as its last value."""

    column: str
    schema: dict[str, Any]
    read: str  # value | hex | text | days | micros | json
    values: tuple[tuple[Any, Any], ...]


def _dec(p: int, s: int, *texts: str) -> tuple[tuple[Any, Any], ...]:
    return tuple((unscaled_b64(Decimal(t), s), str(Decimal(t))) for t in texts)


VSD = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
       "fields": [{"type": "int32", "optional": False, "field": "scale"}, {"type": "bytes", "optional": False, "field": "value"}]}
POINT = {"type": "struct", "name": "io.debezium.data.geometry.Point", "version": 1,
         "fields": [{"type": "double", "optional": False, "field": "x"}, {"type": "double", "optional": False, "field": "y"},
                    {"type": "bytes", "optional": True, "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}]}
LONG_TEXT = "長" * 3000 + "x" * 7000
BLOB = bytes(range(256)) * 64  # 16 KiB

CASES: tuple[Case, ...] = (
    Case("i8", {"type": "int8"}, "value", ((-128, -128), (127, 127), (0, 0))),
    Case("i16", {"type": "int16"}, "value", ((-32768, -32768), (32767, 32767), (7, 7))),
    Case("i32", {"type": "int32"}, "value", ((-(2**31), -(2**31)), (2**31 - 1, 2**31 - 1), (0, 0))),
    Case("i64", {"type": "int64"}, "value", ((I64_MIN, I64_MIN), (I64_MAX, I64_MAX), (1, 1))),
    Case("f32", {"type": "float"}, "value", ((2.0**100, 2.0**100), (-0.5, -0.5), (1.5, 1.5))),
    Case("f64", {"type": "double"}, "value", ((1e300, 1e300), (-2.2250738585072014e-308, -2.2250738585072014e-308), (0.1, 0.1))),
    Case("flag", {"type": "boolean"}, "value", ((True, True), (False, False), (True, True))),
    Case("txt", {"type": "string"}, "value", (("Zoë 李雷 🚀 \"q\" \\ \n", "Zoë 李雷 🚀 \"q\" \\ \n"), ("", ""), (LONG_TEXT, LONG_TEXT))),
    Case("bin", {"type": "bytes"}, "hex", ((b64(b"\x00\xff\x10"), "00FF10"), (b64(b""), ""), (b64(BLOB), BLOB.hex().upper()))),
    Case("dec", _decimal(10, 2), "text", _dec(10, 2, "-12345678.90", "99999999.99", "0.00")),
    Case("dec_wide", _decimal(38, 10), "text", _dec(38, 10, "9999999999999999999999999999.9999999999",
                                                     "-9999999999999999999999999999.9999999999", "0.0000000001")),
    Case("ubig", _decimal(20, 0), "text", _dec(20, 0, "18446744073709551615", "0", "9223372036854775808")),
    Case("dec_str", {"type": "string"}, "value", (("12.3400", "12.3400"), ("-0.01", "-0.01"), ("0", "0"))),
    Case("dec_dbl", {"type": "double"}, "value", ((12.34, 12.34), (-99999999.99, -99999999.99), (0.0, 0.0))),
    Case("d", _named("int32", "io.debezium.time.Date"), "days", ((-719_162, -719_162), (2_932_896, 2_932_896), (19_782, 19_782))),
    Case("d_connect", _named("int32", "org.apache.kafka.connect.data.Date"), "days", ((0, 0), (-1, -1), (20_000, 20_000))),
    Case("t_ms", _named("int32", "io.debezium.time.Time"), "value",
         ((0, _time_text(0)), (86_399_999, _time_text(86_399_999_000)), (45_296_789, _time_text(45_296_789_000)))),
    Case("t_us", _named("int64", "io.debezium.time.MicroTime"), "value",
         ((86_399_999_999, _time_text(86_399_999_999)), (1, _time_text(1)), (45_296_789_012, _time_text(45_296_789_012)))),
    Case("t_ns", _named("int64", "io.debezium.time.NanoTime"), "value",
         ((86_399_999_999_999, _time_text(86_399_999_999)), (999, _time_text(0)), (45_296_789_012_345, _time_text(45_296_789_012)))),
    Case("ts_ms", _named("int64", "io.debezium.time.Timestamp"), "micros",
         ((MIN_US // 1000, MIN_US), (MAX_US // 1000, MAX_US // 1000 * 1000), (1_709_296_496_123, 1_709_296_496_123_000))),
    Case("ts_connect", _named("int64", "org.apache.kafka.connect.data.Timestamp"), "micros",
         ((0, 0), (-1, -1000), (1_709_296_496_123, 1_709_296_496_123_000))),
    Case("ts_us", _named("int64", "io.debezium.time.MicroTimestamp"), "micros",
         ((MIN_US, MIN_US), (MAX_US, MAX_US), (1_709_296_496_123_456, 1_709_296_496_123_456))),
    # int64 nanoseconds reach 2262-04-11: exact integer division, not a double (which rounds there).
    Case("ts_ns", _named("int64", "io.debezium.time.NanoTimestamp"), "micros",
         ((I64_MAX, I64_MAX // 1000), (-1_000, -1), (1_709_296_496_123_456_789, 1_709_296_496_123_456))),
    Case("zts", _named("string", "io.debezium.time.ZonedTimestamp"), "micros",
         (("2024-03-01T12:34:56.123456Z", 1_709_296_496_123_456), ("1970-01-01T00:00:00Z", 0),
          ("9999-12-31T23:59:59.999999Z", MAX_US))),
    Case("ztime", _named("string", "io.debezium.time.ZonedTime"), "value", (("12:34:56.789Z", "12:34:56.789Z"), ("00:00:00Z", "00:00:00Z"), ("23:59:59.999999Z", "23:59:59.999999Z"))),
    Case("yr", _named("int32", "io.debezium.time.Year"), "value", ((1901, 1901), (2155, 2155), (2024, 2024))),
    Case("dur", _named("int64", "io.debezium.time.MicroDuration"), "value", ((I64_MAX, I64_MAX), (-86_400_000_000, -86_400_000_000), (0, 0))),
    Case("ivl", _named("string", "io.debezium.time.Interval"), "value", (("P1Y2M3DT4H5M6.78S", "P1Y2M3DT4H5M6.78S"), ("PT0S", "PT0S"), ("-P1D", "-P1D"))),
    Case("enm", _named("string", "io.debezium.data.Enum", parameters={"allowed": "small,large"}), "value", (("small", "small"), ("large", "large"), ("small", "small"))),
    Case("eset", _named("string", "io.debezium.data.EnumSet", parameters={"allowed": "a,b,c"}), "value", (("a,b", "a,b"), ("", ""), ("c", "c"))),
    Case("js", _named("string", "io.debezium.data.Json"), "value",
         (('{"a": [1, 2], "b": "ü"}', '{"a": [1, 2], "b": "ü"}'), ("[]", "[]"), ("null", "null"))),
    Case("uid", _named("string", "io.debezium.data.Uuid"), "value",
         (("0e9f8d3c-3d6b-4b2a-9a8b-2f0d3c4b5a69", "0e9f8d3c-3d6b-4b2a-9a8b-2f0d3c4b5a69"), ("00000000-0000-0000-0000-000000000000",) * 2,
          ("ffffffff-ffff-ffff-ffff-ffffffffffff",) * 2)),
    Case("xml", _named("string", "io.debezium.data.Xml"), "value", (("<a>1</a>", "<a>1</a>"), ("<b/>", "<b/>"), ("<c>ü</c>", "<c>ü</c>"))),
    Case("bits", _named("bytes", "io.debezium.data.Bits", parameters={"length": "16"}), "hex",
         ((b64(b"\x01\x80"), "0180"), (b64(b"\xff\xff"), "FFFF"), (b64(b"\x00\x00"), "0000"))),
    Case("vsd", VSD, "json",
         (({"scale": 2, "value": unscaled_b64(Decimal("-123.45"), 2)}, {"scale": 2, "value": unscaled_b64(Decimal("-123.45"), 2)}),
          ({"scale": 0, "value": unscaled_b64(Decimal("0"), 0)}, {"scale": 0, "value": unscaled_b64(Decimal("0"), 0)}),
          ({"scale": 10, "value": unscaled_b64(Decimal("1.0000000001"), 10)}, {"scale": 10, "value": unscaled_b64(Decimal("1.0000000001"), 10)}))),
    Case("arr_int", {"type": "array", "items": {"type": "int32", "optional": True}}, "json",
         (([1, None, 3], [1, None, 3]), ([], []), ([I64_MAX], [I64_MAX]))),
    Case("arr_txt", {"type": "array", "items": {"type": "string", "optional": True}}, "json",
         ((["a", "ü,\"x\""], ["a", "ü,\"x\""]), ([None], [None]), ([""], [""]))),
    Case("geo", POINT, "json",
         (({"x": 1.5, "y": 2.5, "wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAARA", "srid": None},
           {"x": 1.5, "y": 2.5, "wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAARA", "srid": None}),
          ({"x": -1.0, "y": 0.0, "wkb": None, "srid": 4326}, {"x": -1.0, "y": 0.0, "wkb": None, "srid": 4326}),
          ({"x": 0.0, "y": 0.0, "wkb": None, "srid": None}, {"x": 0.0, "y": 0.0, "wkb": None, "srid": None}))),
)
# A column the source widens between the first and the second ingest: SMALLINT -> INT -> BIGINT.
WIDENED = ("w", ({"type": "int16"}, {"type": "int32"}, {"type": "int64"}))
WIDENED_VALUES = (-32768, 2**31 - 1, I64_MAX)


def value_of(case: Case, i: int) -> tuple[Any, Any]:
    """The (wire, expected) pair number `i` of a case: its values, then NULL."""
    vals = (*case.values, (None, None))
    return vals[i % len(vals)]


def select_sql(table: str) -> str:
    """A query that reads every column back in a form every engine returns alike."""
    cols = ["id", f"{WIDENED[0]}"]
    for c in CASES:
        q = f"`{c.column}`"
        cols.append({"hex": f"hex({q}) AS {q}", "text": f"CAST({q} AS STRING) AS {q}", "days": f"unix_date({q}) AS {q}",
                     "micros": f"unix_micros({q}) AS {q}"}.get(c.read, q))
    return f"SELECT {', '.join(cols)} FROM {table}"


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row read with `select_sql`, nested JSON parsed (engines differ in spacing)."""
    out = dict(row)
    for c in CASES:
        if c.read == "json" and out.get(c.column) is not None:
            out[c.column] = json.loads(out[c.column])
        if c.read == "value" and isinstance(out.get(c.column), bytearray):
            out[c.column] = bytes(out[c.column])
    return out


class TypedSource:
    """The source table: every case as a column; its rows are the oracle, its events what the
    connector would write for each statement."""

    def __init__(self, db: str, table: str) -> None:
        self.db, self.table = db, table
        self.rows: dict[int, dict[str, Any]] = {}  # id -> expected values
        self.wire: dict[int, dict[str, Any]] = {}  # id -> wire values (the next event's `before`)
        self.version = 0  # WIDENED's schema version
        self.pos = 0

    def _fields(self) -> list[dict[str, Any]]:
        fields = [{"type": "int32", "optional": False, "field": "id"}]
        fields.append({**WIDENED[1][self.version], "optional": True, "field": WIDENED[0]})
        fields += [{**c.schema, "optional": True, "field": c.column} for c in CASES]
        return fields

    def _event(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
        self.pos += 100
        image = {"type": "struct", "optional": True, "fields": self._fields()}
        schema = {"type": "struct", "optional": False, "name": f"t.{self.db}.{self.table}.Envelope", "fields": [
            {**image, "field": "before"}, {**image, "field": "after"}, {"type": "string", "optional": False, "field": "op"},
            {"type": "struct", "optional": False, "field": "source", "fields": []}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
        ts = 1_700_000_000_000 + self.pos
        payload = {"before": before, "after": after, "op": op, "ts_ms": ts + 3,
                   "source": {"version": "3.5.0.Final", "connector": "mysql", "name": "t", "ts_ms": ts, "snapshot": "false",
                              "db": self.db, "table": self.table, "file": "mysql-bin.000003", "pos": self.pos, "row": 0}}
        return {"schema": schema, "payload": payload}

    def widen(self) -> None:
        """The source widens `w` (ALTER TABLE ... MODIFY w INT, then BIGINT)."""
        self.version += 1

    def put(self, rid: int, i: int) -> dict[str, Any]:
        """Insert or update row `rid` with value set `i` of every case."""
        wire: dict[str, Any] = {"id": rid, WIDENED[0]: WIDENED_VALUES[self.version] if i % 2 == 0 else None}
        want: dict[str, Any] = {"id": rid, WIDENED[0]: wire[WIDENED[0]]}
        for c in CASES:
            wire[c.column], want[c.column] = value_of(c, i)
        before = self.wire.get(rid)
        self.wire[rid], self.rows[rid] = wire, want
        return self._event("c" if before is None else "u", before, wire)

    def delete(self, rid: int) -> dict[str, Any]:
        before = self.wire.pop(rid)
        del self.rows[rid]
        return self._event("d", before, None)

    def expected(self) -> list[dict[str, Any]]:
        return [self.rows[k] for k in sorted(self.rows)]
