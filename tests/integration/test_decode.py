"""Envelope decoding in Spark: every logical type, Decimal base64 (negative too), ordering text."""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Context, Decimal
from typing import Any

import pytest
from pyspark.sql import functions as F

from framework.ods import decode as D
from framework.ods.envelope import Decoder


def _b64_decimal(value: Decimal, scale: int, width: int | None = None) -> str:
    unscaled = int(value.scaleb(scale, context=Context(prec=100)))
    n = width or max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()


DECIMALS = pytest.mark.parametrize(
    ("value", "precision", "scale"),
    [
        (Decimal("125.12"), 10, 2),
        (Decimal("-125.12"), 10, 2),
        (Decimal("0.05"), 10, 2),
        (Decimal("-0.05"), 10, 2),
        (Decimal("0"), 5, 0),
        (Decimal("-128"), 5, 0),
        (Decimal("99999999999999999999999999999999.123456"), 38, 6),
        (Decimal("-99999999999999999999999999999999.123456"), 38, 6),
        (Decimal("9999999999999999.99"), 18, 2),
        (Decimal("-9999999999999999.99"), 18, 2),
        (Decimal("-999999999999999999"), 18, 0),
        (Decimal("-1"), 18, 0),
        (Decimal("-0.01"), 12, 2),
        (Decimal("123456789012.345678"), 19, 6),
        (Decimal("-123456789012.345678"), 19, 6),
        # The ends of DECIMAL(38) and of a long: folding signed bytes overflowed past the most negative.
        (Decimal("-99999999999999999999999999999999999999"), 38, 0),
        (Decimal("99999999999999999999999999999999999999"), 38, 0),
        (Decimal("-9999999999999999999999999999.9999999999"), 38, 10),
        (Decimal("-9223372036854775808"), 19, 0),
        (Decimal("9223372036854775807"), 19, 0),
    ],
)
WIDTHS = pytest.mark.parametrize("width", [None, 16], ids=["minimal", "sign-extended"])


@DECIMALS
@WIDTHS
def test_decimal_base64(spark: Any, value: Decimal, precision: int, scale: int, width: int | None) -> None:
    """Minimal two's-complement bytes (Debezium) and bytes sign-extended to a fixed width (Avro
    fixed) decode to the same value."""
    text = _b64_decimal(value, scale, width)
    df = spark.createDataFrame([(text,)], "t string")
    got = df.select(D.decode(F.col("t"), Decoder("decimal_b64", f"decimal({precision},{scale})", scale)).alias("v")).first()["v"]
    assert got == value


@DECIMALS
@WIDTHS
def test_decimal_signed_byte_array(spark: Any, value: Decimal, precision: int, scale: int, width: int | None) -> None:
    """Hudi's CDC log JSON writes a decimal as an array of signed bytes (-128..127)."""
    raw = base64.b64decode(_b64_decimal(value, scale, width))
    arr = [b - 256 if b > 127 else b for b in raw]
    df = spark.createDataFrame([(arr,), (None,), ([],)], "a array<int>")
    got = [r["v"] for r in df.select(D.decimal_from_bytes(F.col("a"), precision, scale).alias("v")).collect()]
    assert got == [value, None, None]


def test_logical_types(spark: Any) -> None:
    cases = [
        ("19439", Decoder("date_days", "date"), dt.date(2023, 3, 23)),
        ("36803000", Decoder("time_ms", "string"), "10:13:23.000000"),
        ("36803123456", Decoder("time_us", "string"), "10:13:23.123456"),
        ("1679581805000", Decoder("ts_ms", "timestamp"), dt.datetime(2023, 3, 23, 14, 30, 5)),
        ("1679581805123456", Decoder("ts_us", "timestamp"), dt.datetime(2023, 3, 23, 14, 30, 5, 123456)),
        ("1679581805123456789", Decoder("ts_ns", "timestamp"), dt.datetime(2023, 3, 23, 14, 30, 5, 123456)),
        ("2023-03-23T14:30:05Z", Decoder("ts_iso", "timestamp"), dt.datetime(2023, 3, 23, 14, 30, 5)),
        ("2023-03-23T16:30:05+02:00", Decoder("ts_iso", "timestamp"), dt.datetime(2023, 3, 23, 14, 30, 5)),
        ("AQI=", Decoder("bytes_b64", "binary"), bytearray(b"\x01\x02")),
        ("true", Decoder("plain", "boolean"), True),
        ("3.140000104904175", Decoder("plain", "double"), 3.140000104904175),
        ("12345.11", Decoder("decimal_b64", "decimal(7,2)", 2), Decimal("12345.11")),
        ('{"a": 1}', Decoder("json", "string"), '{"a": 1}'),
    ]
    df = spark.createDataFrame([(i, c[0]) for i, c in enumerate(cases)], "i int, t string")
    cols = [F.when(F.col("i") == i, D.decode(F.col("t"), d)).alias(f"c{i}") for i, (_, d, _) in enumerate(cases)]
    rows = df.orderBy("i").select(*cols).collect()
    for i, (text, _d, expected) in enumerate(cases):
        assert rows[i][f"c{i}"] == expected, text


def test_garbage_values_are_null_not_job_failures(spark: Any) -> None:
    """Bad values must become NULL (then a dead letter row), never an exception that kills the batch."""
    bad = ["not base64!", "9999999999999999999", "abc", "19439"]
    decoders = [Decoder("decimal_b64", "decimal(10,2)", 2), Decoder("bytes_b64", "binary"), Decoder("ts_ms", "timestamp"),
                Decoder("ts_us", "timestamp"), Decoder("ts_ns", "timestamp"), Decoder("date_days", "date")]
    df = spark.createDataFrame([(b,) for b in bad], "t string")
    out = df.select(*[D.decode(F.col("t"), d).cast("string").alias(f"c{i}") for i, d in enumerate(decoders)]).collect()
    assert out[0]["c0"] is None and out[0]["c1"] is None
    assert out[1]["c2"] is None and out[1]["c5"] is None


def test_position_and_ordering_text_sort_like_the_source(spark: Any) -> None:
    df = spark.createDataFrame(
        [("mysql-bin.000009", 100, 0, 5), ("mysql-bin.000010", 4, 0, 1), ("mysql-bin.000010", 4, 1, 1), ("mysql-bin.000010", 50, 0, 0)],
        "file string, pos long, row long, ts long",
    )
    src = F.struct(F.col("file").alias("file"), F.col("pos").alias("pos"), F.col("row").alias("row"), F.lit(None).cast("long").alias("lsn"),
                   F.lit(None).cast("string").alias("sequence"), F.col("ts").alias("ts_ms"))
    seqs = [r[0] for r in df.select(D.position_seq(src, F.col("ts"))).collect()]
    assert seqs == sorted(seqs)  # binlog order, not ts order
    # PostgreSQL, in stream (commit) order: two snapshot reads at the snapshot's LSN, the first
    # transaction after it (no commit streamed yet: sequence[0] null), a transaction that wrote
    # its change (LSN 120) before the first one's but committed after it, then another.
    pg = spark.createDataFrame([(None, 100, 9), (None, 100, 8), (None, 150, 7), ("200", 120, 6), ("260", 230, 5), ("260", 240, 4)],
                               "last string, lsn long, ts long")
    pg_src = F.struct(F.lit(None).cast("string").alias("file"), F.lit(None).cast("long").alias("pos"), F.lit(None).cast("long").alias("row"),
                      F.col("lsn"), F.concat(F.lit('['), F.when(F.col("last").isNull(), F.lit("null")).otherwise(F.concat(F.lit('"'), F.col("last"), F.lit('"'))),
                                            F.lit(',"'), F.col("lsn").cast("string"), F.lit('"]')).alias("sequence"), F.col("ts").alias("ts_ms"))
    pg_seqs = [r[0] for r in pg.select(D.position_seq(pg_src, F.col("ts"))).collect()]
    assert pg_seqs[2:] == sorted(pg_seqs[2:]) and max(pg_seqs[:2]) < min(pg_seqs[2:])  # commit order, then LSN
    vals = spark.createDataFrame([(-5,), (3,), (None,), (-(2**62),)], "v bigint")
    enc = {r[0]: r[1] for r in vals.select("v", D.ordering_prefix(F.col("v"), "bigint")).collect()}
    assert enc[None] < enc[-(2**62)] < enc[-5] < enc[3]
    ts = spark.createDataFrame([(dt.datetime(1960, 1, 1),), (dt.datetime(2024, 1, 1),)], "t timestamp")
    e = [r[0] for r in ts.select(D.ordering_prefix(F.col("t"), "timestamp")).collect()]
    assert e[0] < e[1]
    with pytest.raises(ValueError, match="ordering column"):
        D.ordering_prefix(F.col("t"), "string")
