"""PostgreSQL source pieces that need no server or Spark: LSN text, slot names, placeholder forms."""

from __future__ import annotations

import base64
import json

from framework.demo.postgres import _slot, lsn_int
from framework.ods.unavailable import DEFAULT_PLACEHOLDER, forms


def test_lsn_text_is_the_number_debezium_writes() -> None:
    # PostgreSQL prints an LSN as two hex halves; Debezium's source.lsn is the 64-bit number.
    assert lsn_int("0/16B3748") == 0x16B3748
    assert lsn_int("1/0") == 1 << 32
    assert lsn_int("A/FF") == (10 << 32) + 255


def test_slot_names_are_what_postgres_accepts() -> None:
    assert _slot("lake-PgChain-1") == "lake_pgchain_1"
    assert len(_slot("x" * 100)) == 63


def test_placeholder_forms_cover_text_bytes_and_arrays() -> None:
    text, b64, arr = forms(DEFAULT_PLACEHOLDER)
    assert text == "__debezium_unavailable_value"
    assert base64.b64decode(b64) == b"__debezium_unavailable_value"  # bytea, binary.handling.mode=bytes
    assert json.loads(arr) == ["__debezium_unavailable_value"]
