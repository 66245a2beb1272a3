"""The Debezium simulator writes real-looking envelopes whose replay equals its source state (no Spark)."""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest

from framework import demo as dd
from framework.ods.envelope import row_columns


def _events(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def _decode(schema: dict[str, Any], image: dict[str, Any] | None) -> dict[str, Any] | None:
    """Python values of a row image, read back through its schema block (like a consumer)."""
    if image is None:
        return None
    fields = {f["field"]: f for f in schema["fields"][1]["fields"]}
    out: dict[str, Any] = {}
    for name, value in image.items():
        f = fields[name]
        logical = f.get("name")
        if value is None:
            out[name] = None
        elif logical == "org.apache.kafka.connect.data.Decimal":
            scale = int(f["parameters"]["scale"])
            out[name] = Decimal(int.from_bytes(base64.b64decode(value), "big", signed=True)).scaleb(-scale)
        elif logical == "io.debezium.time.ZonedTimestamp":
            out[name] = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        elif logical == "io.debezium.time.Date":
            out[name] = date(1970, 1, 1) + timedelta(days=value)
        else:
            out[name] = value
    return out


def _replay(sim: dd.Simulator, lines: list[str]) -> dict[str, dict[tuple[Any, ...], dict[str, Any]]]:
    """Apply every envelope to an empty copy of the tables, as an ODS table should."""
    state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {t: {} for t in sim.tables}
    for ev in _events(lines):
        p = ev["payload"]
        name = f"{p['source']['db']}.{p['source']['table']}"
        key_cols = sim.table(name).key
        before, after = _decode(ev["schema"], p["before"]), _decode(ev["schema"], p["after"])
        if p["op"] == "d":
            assert before is not None
            key = tuple(before[k] for k in key_cols)
            assert key in state[name], f"delete of a missing row {name} {key}"
            del state[name][key]
        else:
            assert after is not None
            key = tuple(after[k] for k in key_cols)
            if p["op"] == "u":
                # Rows last written before the ALTER have no `age` yet; the source has NULL there.
                last = {**dict.fromkeys(before), **state[name][key]}
                assert last == before, "update's before-image is the row's last state"
            state[name][key] = after
    return state


def _position(ev: dict[str, Any]) -> tuple[int, int, int]:
    s = ev["payload"]["source"]
    return (int(s["file"].rsplit(".", 1)[1]), s["pos"], s["row"])


# --------------------------------------------------------------------------- decimals
@pytest.mark.parametrize(
    ("value", "scale", "raw"),
    [
        (Decimal("0"), 2, b"\x00"),
        (Decimal("1.27"), 2, b"\x7f"),
        (Decimal("1.28"), 2, b"\x00\x80"),
        (Decimal("-1.28"), 2, b"\x80"),
        (Decimal("-1.29"), 2, b"\xff\x7f"),
        (Decimal("12.34"), 2, b"\x04\xd2"),
        (Decimal("99999999.99"), 2, (9999999999).to_bytes(5, "big", signed=True)),
        (Decimal("-0.01"), 2, b"\xff"),
        (Decimal("42"), 0, b"\x2a"),
    ],
)
def test_decimal_is_minimal_twos_complement_and_round_trips(value: Decimal, scale: int, raw: bytes) -> None:
    text = dd.encode_decimal(value, scale)
    assert base64.b64decode(text) == raw  # BigInteger.toByteArray(): fewest bytes, sign bit kept
    unscaled = int.from_bytes(base64.b64decode(text), "big", signed=True)
    assert Decimal(unscaled).scaleb(-scale) == value
    assert dd.decode_decimal(text, scale) == value


def test_decimal_with_too_many_places_is_refused() -> None:
    with pytest.raises(ValueError, match="decimal places"):
        dd.encode_decimal(Decimal("1.005"), 2)


def test_product_prices_decode_to_the_source_values() -> None:
    sim = dd.Simulator(seed=3)
    lines = sim.snapshot([dd.PRODUCT])
    prices = {ev["payload"]["after"]["pid"]: ev["payload"]["after"]["pprice"] for ev in _events(lines)}
    for (pid,), row in sim.state(dd.PRODUCT).items():
        assert dd.decode_decimal(prices[pid], 2) == row["pprice"]


# --------------------------------------------------------------------------- positions and times
def test_snapshot_first_then_strictly_increasing_binlog_positions() -> None:
    sim = dd.Simulator(seed=11)
    snap = _events(sim.snapshot())
    changes = _events(sim.changes(300))
    assert len(snap) == sum(dd.DEFAULT_INITIAL_ROWS.values())
    assert {ev["payload"]["op"] for ev in snap} == {"r"}
    assert [ev["payload"]["source"]["snapshot"] for ev in snap] == ["true"] * (len(snap) - 1) + ["last"]
    assert len({_position(ev) for ev in snap}) == 1  # one snapshot position, row 0
    assert snap[0]["payload"]["source"]["row"] == 0
    positions = [_position(ev) for ev in changes]
    assert positions[0] > _position(snap[-1])
    assert all(a < b for a, b in pairwise(positions)), "(file, pos, row) strictly increases"
    assert all(ev["payload"]["source"]["snapshot"] == "false" for ev in changes)
    assert {ev["payload"]["op"] for ev in changes} == {"c", "u", "d"}


def test_multi_row_statements_share_pos_and_count_rows() -> None:
    changes = _events(dd.Simulator(seed=5).changes(300))
    by_pos: dict[int, list[int]] = {}
    for ev in changes:
        by_pos.setdefault(ev["payload"]["source"]["pos"], []).append(ev["payload"]["source"]["row"])
    multi = [rows for rows in by_pos.values() if len(rows) > 1]
    assert multi, "some statements change several rows"
    assert all(rows == list(range(len(rows))) for rows in by_pos.values())
    gaps = sorted(by_pos)
    assert all(100 < b - a < 2000 for a, b in pairwise(gaps)), "pos grows by a transaction's size"


def test_binlog_times_are_whole_seconds_and_envelope_is_later() -> None:
    sim = dd.Simulator(seed=2)
    snap = _events(sim.snapshot())
    changes = _events(sim.changes(200))
    for ev in changes:
        p = ev["payload"]
        assert p["source"]["ts_ms"] % 1000 == 0
        assert 0 < p["ts_ms"] - p["source"]["ts_ms"] < 2000
    assert changes[0]["payload"]["source"]["ts_ms"] > snap[-1]["payload"]["source"]["ts_ms"]
    source_times = [ev["payload"]["source"]["ts_ms"] for ev in changes]
    assert source_times == sorted(source_times)


def test_modify_time_never_goes_back_on_update() -> None:
    sim = dd.Simulator(seed=4)
    sim.snapshot()
    updates = [ev for ev in _events(sim.changes(400)) if ev["payload"]["op"] == "u" and ev["payload"]["source"]["db"] == "test_db"]
    assert updates
    for ev in updates:
        before, after = _decode(ev["schema"], ev["payload"]["before"]), _decode(ev["schema"], ev["payload"]["after"])
        assert before is not None and after is not None
        assert after["modify_time"] >= before["modify_time"]
        assert after["modify_time"] == datetime.fromtimestamp(ev["payload"]["source"]["ts_ms"] / 1000, timezone.utc)
        assert after["create_time"] == before["create_time"]
        assert any(after[k] != before[k] for k in after if k != "modify_time")


# --------------------------------------------------------------------------- schema block
def test_schema_block_is_a_kafka_connect_envelope() -> None:
    sim = dd.Simulator(seed=1)
    events = {f"{e['payload']['source']['db']}.{e['payload']['source']['table']}": e for e in _events(sim.snapshot())}
    ev = events[dd.PRODUCT]
    schema = ev["schema"]
    assert schema["type"] == "struct" and schema["optional"] is False
    assert schema["name"] == "demo.test_db.product.Envelope"
    assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms", "transaction"]
    before, after, source, op, ts_ms, _ = schema["fields"]
    assert before["name"] == after["name"] == "demo.test_db.product.Value"
    assert before["type"] == "struct" and before["fields"] == after["fields"]
    assert source["name"] == "io.debezium.connector.mysql.Source"
    assert set(ev["payload"]["source"]) == {f["field"] for f in source["fields"]}
    assert (op["type"], ts_ms["type"]) == ("string", "int64")
    fields = {f["field"]: f for f in after["fields"]}
    assert list(fields) == list(ev["payload"]["after"])
    assert fields["pid"] == {"type": "int32", "optional": False, "field": "pid"}
    assert fields["pname"]["type"] == "string"
    assert fields["pprice"] == {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "pprice",
    }
    assert fields["create_time"]["type"] == "string"
    assert fields["create_time"]["name"] == "io.debezium.time.ZonedTimestamp"
    p = ev["payload"]
    assert p["source"]["version"] == "2.5.0.Final" and p["source"]["connector"] == "mysql"
    assert p["source"]["name"] == "demo" and p["transaction"] is None
    assert p["after"]["create_time"].endswith("Z") and "T" in p["after"]["create_time"]


def test_schema_block_types_as_the_ods_decoder_reads_them() -> None:
    sim = dd.Simulator(seed=1)
    first: dict[str, dict[str, Any]] = {}
    for e in _events(sim.snapshot()):
        first.setdefault(f"{e['payload']['source']['db']}.{e['payload']['source']['table']}", e)
    types = {t: {c.name: c.decoder.spark_type for c in row_columns(e["schema"])} for t, e in first.items()}
    assert types[dd.USER] == {
        "id": "int", "name": "string", "device_model": "string", "email": "string", "phone": "string",
        "create_time": "timestamp", "modify_time": "timestamp",
    }
    assert types[dd.PRODUCT]["pprice"] == "decimal(10,2)"
    assert types[dd.CUSTOMER] == {"CUST_ID": "bigint", "NAME": "string", "MKTSEGMENT": "string"}
    assert types[dd.SALES_ORDER_ALL]["ORDER_DATE"] == "date"
    date_field = next(f for f in first[dd.SALES_ORDER_ALL]["schema"]["fields"][1]["fields"] if f["field"] == "ORDER_DATE")
    assert (date_field["type"], date_field["name"]) == ("int32", "io.debezium.time.Date")


def test_datetime_and_timestamp_encodings() -> None:
    col = dd.Column("at", "datetime")
    assert col.field_schema()["name"] == "io.debezium.time.Timestamp"
    assert col.field_schema()["type"] == "int64"
    assert dd.encode_value(col, datetime(2024, 3, 1, 10, 0, 0)) == 1709287200000
    ts = dd.Column("t", "timestamp")
    assert dd.encode_value(ts, datetime(2024, 3, 1, 10, 0, tzinfo=timezone.utc)) == "2024-03-01T10:00:00Z"
    assert dd.encode_value(dd.Column("d", "date"), date(1970, 1, 2)) == 1


# --------------------------------------------------------------------------- schema change
def test_add_column_events_carry_age_and_old_rows_are_null() -> None:
    sim = dd.Simulator(seed=9)
    before_alter = _events(sim.snapshot() + sim.changes(100))
    user_before = [e for e in before_alter if e["payload"]["source"]["table"] == "user"]
    assert all("age" not in (e["payload"]["after"] or e["payload"]["before"]) for e in user_before)
    old_keys = set(sim.state(dd.USER))
    sim.add_column_user_age()
    assert all(row["age"] is None for row in sim.state(dd.USER).values())
    after_alter = _events(sim.changes(200))
    user_after = [e for e in after_alter if e["payload"]["source"]["table"] == "user"]
    assert user_after
    for e in user_after:
        image = e["payload"]["after"] or e["payload"]["before"]
        assert "age" in image
        fields = [f["field"] for f in e["schema"]["fields"][1]["fields"]]
        assert fields[-1] == "age"
    set_age = [e for e in user_after if e["payload"]["op"] == "u" and e["payload"]["after"]["age"] is not None]
    assert set_age, "some updates set age"
    state = sim.state(dd.USER)
    assert any(state[k]["age"] is None for k in old_keys & set(state)), "untouched old rows keep NULL"
    assert _position(after_alter[0]) > _position(before_alter[-1])
    with pytest.raises(ValueError):
        sim.add_column_user_age()


# --------------------------------------------------------------------------- state
def test_replaying_all_events_gives_the_source_state() -> None:
    sim = dd.Simulator(seed=21)
    lines = sim.snapshot() + sim.changes(600)
    sim.add_column_user_age()
    lines += sim.changes(400)
    replayed = _replay(sim, lines)
    for name in sim.tables:
        expected = sim.state(name)
        if name == dd.USER:
            # Images written before the ALTER have no `age`; the source has NULL there.
            replayed[name] = {k: {**v, "age": v.get("age")} for k, v in replayed[name].items()}
        assert replayed[name] == expected, name


def test_keys_are_reused_after_delete() -> None:
    sim = dd.Simulator(seed=21)
    sim.snapshot()
    seen_deleted: set[tuple[str, Any]] = set()
    reinserted = []
    for ev in _events(sim.changes(1000)):
        p = ev["payload"]
        table = p["source"]["table"]
        key_col = ev["schema"]["fields"][1]["fields"][0]["field"]
        if p["op"] == "d":
            seen_deleted.add((table, p["before"][key_col]))
        elif p["op"] == "c" and (table, p["after"][key_col]) in seen_deleted:
            reinserted.append((table, p["after"][key_col]))
    assert len(reinserted) >= 3


def test_orders_reference_existing_rows() -> None:
    sim = dd.Simulator(seed=8)
    lines = sim.snapshot() + sim.changes(500)
    users: set[int] = set()
    products: set[int] = set()
    sites: set[int] = set()
    for ev in _events(lines):
        p = ev["payload"]
        table, row = p["source"]["table"], p["after"]
        if p["op"] == "d":
            continue
        if table == "user":
            users.add(row["id"])
        elif table == "product":
            products.add(row["pid"])
        elif table == "CUSTOMER_SITE":
            sites.add(row["SITE_ID"])
        elif table == "user_order" and p["op"] == "c":
            assert row["uid"] in users and row["pid"] in products
        elif table == "SALES_ORDER_ALL" and p["op"] == "c":
            assert row["SITE_ID"] in sites


def test_state_is_a_copy_with_python_values() -> None:
    sim = dd.Simulator(seed=1)
    state = sim.state(dd.PRODUCT)
    key, row = next(iter(state.items()))
    assert isinstance(key, tuple) and isinstance(row["pprice"], Decimal)
    assert row["create_time"].tzinfo is not None
    row["pname"] = "changed"
    assert sim.state(dd.PRODUCT)[key]["pname"] != "changed"
    assert isinstance(next(iter(sim.state(dd.SALES_ORDER_ALL).values()))["ORDER_DATE"], date)
    with pytest.raises(KeyError):
        sim.state("test_db.nope")


# --------------------------------------------------------------------------- determinism and files
def test_same_seed_same_lines_other_seed_other_lines() -> None:
    def run(seed: int) -> list[str]:
        sim = dd.Simulator(seed)
        out = sim.snapshot() + sim.changes(150)
        sim.add_column_user_age()
        return out + sim.changes(50)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_changes_returns_exactly_n_lines_and_write_puts_one_per_line(tmp_path: Any) -> None:
    sim = dd.Simulator(seed=3)
    lines = sim.changes(37)
    assert len(lines) == 37
    path = dd.write(lines, tmp_path / "cdc" / "0001-changes.json")
    assert path.read_text().splitlines() == lines


def test_inventory_sample_is_a_snapshot_then_insert_update_delete() -> None:
    events = _events(dd.inventory_sample())
    assert [e["payload"]["op"] for e in events] == ["r", "r", "r", "r", "c", "u", "d"]
    assert events[3]["payload"]["source"]["snapshot"] == "last"
    assert events[0]["schema"]["name"] == "dbserver1.inventory.customers.Envelope"
    positions = [_position(e) for e in events[3:]]
    assert all(a < b for a, b in pairwise(positions))
