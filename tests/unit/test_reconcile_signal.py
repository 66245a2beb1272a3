"""`lake reconcile --repair` through a Debezium signal table (framework/reconcile/signal.py): the
SQL filter each differing key becomes, the signals' `data` and how keys are split over them, and
the signal table's routing ids ODS skips. The real connector running these signals is tested in
tests/integration/test_reconcile.py (nightly)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from framework.errors import ConfigError, LakeError
from framework.project.config import load_project
from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.signal import key_conditions, literal, payload, payloads
from framework.reconcile.sql import dialect
from framework.reconcile.target import signal_sources

MY, PG = dialect("mariadb"), dialect("postgres")
ID = ColumnSpec("id", "id", "int")
CODE = ColumnSpec("code", "code", "string")
N = ColumnSpec("n", "n", "int")
DAY = ColumnSpec("day", "day", "date")


def test_an_integer_key_is_matched_as_itself_and_many_in_one_in_list() -> None:
    conds = key_conditions(MY, [ID], [("7",), ("-3",), ("12",)], 6)
    assert conds == ["`id` = 7", "`id` = -3", "`id` = 12"]
    f = json.loads(payload("shop.orders", conds))["additional-conditions"][0]["filter"]
    assert f == "`id` IN (7, -3, 12)"


def test_string_and_composite_keys_quote_what_the_dialect_reads_as_escapes() -> None:
    nasty = "it's a \\ back'slash"
    assert literal(MY, nasty) == "'it''s a \\\\ back''slash'"
    assert literal(PG, nasty) == "E'it''s a \\\\ back''slash'"
    conds = key_conditions(PG, [CODE, N], [(nasty, "3"), ("c1", "4")], 6)
    assert conds == [f"(\"code\" = {literal(PG, nasty)} AND \"n\" = 3)", "(\"code\" = E'c1' AND \"n\" = 4)"]
    assert json.loads(payload("sales.tags", conds))["additional-conditions"][0]["filter"] == " OR ".join(conds)


def test_the_filters_select_exactly_the_keys_in_a_database() -> None:
    """The composite filter run in SQLite (backtick identifiers and '' quotes read as MySQL reads
    them; no backslash in these values, which SQLite does not unescape): exactly the keys asked for."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE tags (code TEXT, n INTEGER, PRIMARY KEY (code, n))")
    rows = [(c, n) for c in ("a", "b", "o'k", "a b") for n in range(5)]
    db.executemany("INSERT INTO tags VALUES (?, ?)", rows)
    wanted = [("o'k", "2"), ("a b", "0"), ("a", "4")]
    f = json.loads(payload("db.tags", key_conditions(MY, [CODE, N], wanted, 6)))["additional-conditions"][0]["filter"]
    got = sorted(db.execute(f"SELECT code, n FROM tags WHERE {f}").fetchall())
    assert got == sorted((c, int(n)) for c, n in wanted)
    f = json.loads(payload("db.t", key_conditions(MY, [N], [("1",), ("3",)], 6)))["additional-conditions"][0]["filter"]
    assert sorted(db.execute(f"SELECT DISTINCT n FROM tags WHERE {f.replace('`n`', 'n')}").fetchall()) == [(1,), (3,)]


def test_other_kinds_match_their_canonical_text_as_the_connector_runs_it() -> None:
    (cond,) = key_conditions(MY, [DAY], [("2024-05-01",)], 6)
    assert cond == "DATE_FORMAT(`day`, '%Y-%m-%d') = '2024-05-01'"  # '%' as the database reads it, not '%%'


def test_a_signal_names_the_collection_and_asks_for_an_incremental_snapshot() -> None:
    data = json.loads(payload("shop.orders", ["`id` = 1"]))
    assert data == {"data-collections": ["shop.orders"], "type": "incremental",
                    "additional-conditions": [{"data-collection": "shop.orders", "filter": "`id` = 1"}]}


def test_keys_are_split_over_signals_that_each_fit_the_data_column() -> None:
    conds = key_conditions(MY, [CODE], [(f"key-{i:05d}-" + "x" * (i % 40),) for i in range(400)], 6)
    out = payloads("shop.orders", conds, 600)
    assert len(out) > 1 and all(len(p) <= 600 for p in out)
    filters = [json.loads(p)["additional-conditions"][0]["filter"] for p in out]
    assert sorted(c for f in filters for c in f.split(" OR ")) == sorted(conds)  # each key in exactly one signal


def test_a_key_too_long_for_one_signal_is_an_error_with_the_fix() -> None:
    with pytest.raises(LakeError) as e:
        payloads("shop.orders", key_conditions(MY, [CODE], [("x" * 700,)], 6), 300)
    assert "signal_max_chars" in str(e.value) and "widen the signal table" in (e.value.fix or "")


def test_signal_tables_route_as_ods_names_them(tmp_path: Path) -> None:
    """The routing ids ODS skips, from a real lake.yaml: `<db>.<table>` on MariaDB; on PostgreSQL
    `<db>.<schema>.<table>`, and `<db>.<table>` too for `public` (as events of `public` route)."""
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "shop.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    (tmp_path / "lake.yaml").write_text(
        "name: p\nreconcile:\n  sources:\n"
        "    shop: {dialect: mariadb, host: h, user: u, signal: shop.debezium_signal}\n"
        "    pg: {dialect: postgres, host: h, user: u, signal: public.dbz_signal}\n"
        "    wh: {dialect: postgres, host: h, user: u, database: whdb, signal: ops.sig}\n"
        "    plain: {dialect: mysql, host: h, user: u}\n")
    assert signal_sources(load_project(tmp_path)) == ["pg.dbz_signal", "pg.public.dbz_signal", "shop.debezium_signal", "whdb.ops.sig"]
    (tmp_path / "lake.yaml").write_text("name: p\nreconcile:\n  sources:\n    shop: {dialect: mariadb, host: h, user: u, signal: debezium_signal}\n")
    with pytest.raises(ConfigError) as e:  # Debezium's collection name has two parts
        load_project(tmp_path)
    assert "signal" in str(e.value)
