"""Spark expressions that turn envelope JSON text into typed columns and ordering sequences.

Everything here stays in the JVM (no Python UDFs): row images are parsed as map<string,string>
(JSON numbers keep their exact text, nested values their JSON text) and each value is decoded
according to its :class:`~framework.ods.envelope.Decoder`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.ods.envelope import Decoder

IMAGE_MAP = T.MapType(T.StringType(), T.StringType())

# Outer envelope: either {schema, payload} (JsonConverter with schemas) or the bare envelope.
ENVELOPE = T.StructType(
    [
        T.StructField("schema", T.StringType()),
        T.StructField("payload", T.StringType()),
        T.StructField("before", T.StringType()),
        T.StructField("after", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("source", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ]
)
PAYLOAD = T.StructType(
    [
        T.StructField("before", T.StringType()),
        T.StructField("after", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("source", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ]
)
SOURCE = T.StructType(
    [
        T.StructField("connector", T.StringType()),
        T.StructField("db", T.StringType()),
        T.StructField("schema", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("file", T.StringType()),
        T.StructField("pos", T.LongType()),
        T.StructField("row", T.LongType()),
        T.StructField("lsn", T.LongType()),
        T.StructField("sequence", T.StringType()),
        T.StructField("snapshot", T.StringType()),
        T.StructField("server_id", T.LongType()),
        T.StructField("gtid", T.StringType()),
    ]
)
JSON_OPTS = {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"}


def safe_unbase64(text: Column) -> Column:
    """unbase64 that yields NULL (→ dead letter) for invalid input instead of failing the job."""
    valid = text.rlike(r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
    return F.when(valid, F.unbase64(F.when(valid, text)))


def decimal_from_base64(text: Column, precision: int, scale: int) -> Column:
    """Kafka Connect Decimal: base64 of the big-endian two's-complement unscaled value."""
    raw = safe_unbase64(text)
    octets = F.when(F.octet_length(raw) > 0, F.transform(F.sequence(F.lit(1), F.octet_length(raw)),
                                                         lambda i: F.conv(F.hex(raw.substr(i, F.lit(1))), 16, 10).cast("int")))
    return decimal_from_bytes(octets, precision, scale)


def decimal_from_bytes(arr: Column, precision: int, scale: int) -> Column:
    """decimal(precision, scale) from the big-endian two's-complement bytes of its unscaled value,
    as an array of ints (signed -128..127 or unsigned 0..255); NULL for NULL, no bytes or a value
    that does not fit. Minimal encodings (Debezium) and sign-extended ones (Avro fixed) alike;
    Hudi's CDC log JSON writes an Avro decimal as such an array of signed bytes.

    A fold over the bytes: a handful of plan nodes per column. The hex-text arithmetic it replaces
    repeated its input in every step, so each decimal column put a tree of thousands of nodes in
    every plan that decoded it, and Spark spent seconds per query analysing it and printing it
    into each adaptive re-plan's description (JFR samples of an aggregate model's build)."""

    # A negative value is folded as its one's complement (each byte 255 - b, then -x - 1): every
    # step's partial value is then at most the result's magnitude, where folding the signed
    # bytes passes through acc * 256 = v - b, one past DECIMAL(38)'s range for the most negative
    # 38-digit values (-99999999999999999999999999999999999999 read as NULL, a dead letter).
    def unsigned(b: Column) -> Column:
        return F.when(b < 0, b + 256).otherwise(b)

    negative = (F.element_at(arr, 1) < 0) | (F.element_at(arr, 1) > 127)

    def fold(t: str) -> Column:
        def step(acc: Column, b: Column) -> Column:
            u = unsigned(b)
            return (acc * 256 + F.when(negative, 255 - u).otherwise(u)).cast(t)

        magnitude = F.aggregate(arr, F.lit(0).cast(t), step)
        return F.when(F.size(arr) > 0, F.when(negative, -magnitude - 1).otherwise(magnitude)).cast(t)

    # Up to 8 bytes fit a long (cheap); longer ones fold in decimal(38,0), NULL on overflow.
    unscaled = F.when(F.size(arr) <= 8, fold("bigint").cast("decimal(38,0)")).otherwise(fold("decimal(38,0)"))
    # "<unscaled>E-<scale>" reads exactly as the decimal (Java BigDecimal syntax).
    return F.concat(unscaled.cast("string"), F.lit(f"E-{scale}")).cast(f"decimal({precision},{scale})")


# Years 0001..9999: outside, Spark's timestamp functions overflow and fail the whole job.
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MIN_DAYS, _MAX_DAYS = -719_162, 2_932_896


def millis_to_timestamp(ms: Column) -> Column:
    """TIMESTAMP of epoch milliseconds; NULL outside the years 0001-9999 (Spark would overflow)."""
    return F.timestamp_millis(_within(ms, _MIN_US // 1000, _MAX_US // 1000))


def _within(v: Column, lo: int, hi: int) -> Column:
    """NULL (→ dead letter as unreadable) when out of range, instead of an overflow exception."""
    return F.when((v >= F.lit(lo)) & (v <= F.lit(hi)), v)


def _micros_of_nanos(text: Column) -> Column:
    """Whole microseconds of an int64 nanosecond count, exactly: the division in DECIMAL, not in
    DOUBLE, whose 53 bits round near Debezium's NanoTimestamp range end (2262: 9.2e15 us)."""
    return F.floor(text.cast("bigint").cast("decimal(20,0)") / F.lit(1000).cast("decimal(20,0)")).cast("bigint")


def _time_text(micros: Column) -> Column:
    secs = F.floor(micros / 1_000_000)
    frac = F.lpad((micros % 1_000_000).cast("string"), 6, "0")
    return F.concat(
        F.lpad(F.floor(secs / 3600).cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(F.floor((secs % 3600) / 60).cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad((secs % 60).cast("string"), 2, "0"),
        F.lit("."),
        frac,
    )


def decode(text: Column, d: Decoder) -> Column:
    """Typed value of one column from its JSON text."""
    k = d.kind
    if k == "plain":
        if d.spark_type == "boolean":
            return F.when(F.lower(text).isin("true", "1"), F.lit(True)).when(
                F.lower(text).isin("false", "0"), F.lit(False)
            )
        if d.spark_type == "timestamp":
            return F.to_timestamp(text)
        if d.spark_type == "date":
            return F.to_date(text)
        return text.cast(d.spark_type)
    if k == "json":
        return text
    if k == "decimal_b64":
        precision, scale = d.spark_type[len("decimal(") : -1].split(",")
        # decimal.handling.mode=string|double writes plain numbers; precise writes base64.
        plain = text.rlike(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
        return F.when(plain, text.cast(d.spark_type)).otherwise(
            decimal_from_base64(text, int(precision), int(scale))
        )
    if k == "date_days":
        return F.date_add(F.lit("1970-01-01").cast("date"), _within(text.cast("bigint"), _MIN_DAYS, _MAX_DAYS).cast("int"))
    if k == "time_ms":
        return _time_text(text.cast("bigint") * 1000)
    if k == "time_us":
        return _time_text(text.cast("bigint"))
    if k == "time_ns":
        return _time_text(_micros_of_nanos(text))
    if k == "ts_ms":
        return F.timestamp_millis(_within(text.cast("bigint"), _MIN_US // 1000, _MAX_US // 1000))
    if k == "ts_us":
        return F.timestamp_micros(_within(text.cast("bigint"), _MIN_US, _MAX_US))
    if k == "ts_ns":
        return F.timestamp_micros(_within(_micros_of_nanos(text), _MIN_US, _MAX_US))
    if k == "ts_iso":
        return F.to_timestamp(text)
    if k == "bytes_b64":
        return safe_unbase64(text)
    raise ValueError(f"unknown decoder kind {k!r}")


def _pad(c: Column, width: int) -> Column:
    return F.lpad(F.coalesce(c.cast("decimal(38,0)").cast("string"), F.lit("0")), width, "0")


def commit_lsn(source: Column) -> Column:
    """PostgreSQL: where the event's transaction stands in commit order. Debezium's
    `source.sequence` is `["<LSN of the last committed transaction>", "<LSN of the event>"]`; its
    first element is NULL until the connector streamed a commit (snapshot reads, the first
    transaction after a snapshot), where the event's own LSN stands in. NULL without `source.lsn`.

    The event's own LSN alone is the WAL position of the change, written when the statement ran:
    a transaction that started before another and committed after it has lower LSNs than the
    other's; commit order is what decides (a re-snapshot after streaming, for one, must win)."""
    last = F.get_json_object(source["sequence"], "$[0]")
    last = F.when(last.rlike(r"^[0-9]+$"), last.cast("decimal(38,0)"))
    return F.when(source["lsn"].isNotNull(), F.coalesce(last, source["lsn"].cast("decimal(38,0)")))


def position_seq(source: Column, ts_ms: Column) -> Column:
    """Sortable text of the CDC position (framework/ods/position.py has the layout): binlog file
    number, pos, row; for PostgreSQL the commit-order LSN (`commit_lsn`) in the pos slot, then
    the event's LSN; ts_ms."""
    file_no = F.regexp_extract(F.coalesce(source["file"], F.lit("")), r"(\d+)$", 1)
    file_no = F.when(file_no == "", F.lit(None)).otherwise(file_no)
    return F.concat(
        _pad(file_no, 10),
        _pad(F.coalesce(source["pos"].cast("decimal(38,0)"), commit_lsn(source)), 20),
        _pad(source["row"], 8),
        _pad(source["lsn"], 20),
        _pad(F.coalesce(source["ts_ms"], ts_ms), 15),
    )


_ORDERING_WIDTH = {"timestamp": 19, "date": 9, "tinyint": 20, "smallint": 20, "int": 20, "bigint": 20}


def ordering_width(spark_type: str) -> int:
    """Characters `ordering_prefix` gives a column of this type."""
    if spark_type.lower() not in _ORDERING_WIDTH:
        ordering_prefix(F.lit(None), spark_type)  # raises the error that names the types allowed
    return _ORDERING_WIDTH[spark_type.lower()]


def ordering_prefix(value: Column, spark_type: str) -> Column:
    """Sortable fixed-width text of a configured ordering column; NULL sorts first."""
    t = spark_type.lower()
    if t == "timestamp":
        v = F.unix_micros(value).cast("decimal(38,0)") + F.lit(500_000_000_000_000_000).cast("decimal(38,0)")
        return _pad(v, 19)
    if t == "date":
        v = F.unix_date(value) + F.lit(10_000_000)
        return _pad(v, 9)
    if t in ("tinyint", "smallint", "int", "bigint"):
        v = value.cast("decimal(38,0)") + F.lit("9223372036854775808").cast("decimal(38,0)")
        return _pad(v, 20)
    raise ValueError(
        f"ordering column has type {spark_type.upper()}; use a timestamp, date or integer column"
    )


def source_server(source: Column) -> Column:
    """Which database server wrote an event: MySQL/MariaDB `server_id`, else the server part of
    its GTID (MySQL `uuid:N` -> uuid, MariaDB `domain-server-seq` -> domain-server); NULL when
    neither is there (binlog positions are only comparable between events of one server)."""
    gtid = F.coalesce(source["gtid"], F.lit(""))
    mysql = F.regexp_extract(gtid, r"^([0-9A-Fa-f-]{36}):", 1)
    maria = F.regexp_extract(gtid, r"^(\d+-\d+)-\d+$", 1)
    from_gtid = F.when(mysql != "", F.lower(mysql)).when(maria != "", maria)
    return F.coalesce(source["server_id"].cast("string"), from_gtid)


def binlog_position(pos_seq: Column, source: Column) -> Column:
    """The binlog file number and position slice of `pos_seq` (30 digits); NULL for events
    without a binlog file (Postgres, SQL Server, snapshots without a position)."""
    return F.when(source["file"].isNotNull() & source["pos"].isNotNull(), F.substring(pos_seq, 1, 30))
