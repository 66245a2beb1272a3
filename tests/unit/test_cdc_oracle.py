"""The real chain's oracle compares values as text made alike on both sides (framework/demo/oracle.py)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from framework.demo.oracle import canon


def test_numbers_compare_by_value() -> None:
    # A DECIMAL(10,2) from MariaDB, a SUM's DECIMAL and Spark's BIGINT of the same value.
    assert canon(Decimal("59.00")) == canon(Decimal("59")) == canon(59) == "59"
    assert canon(Decimal("-0.10")) == canon(Decimal("-0.1")) == "-0.1"
    assert canon(Decimal("99999999.99")) == "99999999.99"
    assert canon(Decimal("1E+3")) == "1000"
    assert canon(Decimal("59.01")) != canon(Decimal("59.10"))


def test_times_keep_microseconds_and_other_values_pass() -> None:
    assert canon(datetime(1965, 7, 20, 10, 0, 0, 125000)) == "1965-07-20 10:00:00.125000"
    assert canon(date(2024, 2, 29)) == "2024-02-29"
    assert canon(None) is None and canon("José 🚀") == "José 🚀" and canon(True) == "true"
    assert canon(b"\x00\xff") == "00ff"
