"""docs/quickstart.md run as written, against a real Kafka broker.

The page's `bash` blocks are executed by bash in order, in a home folder of their own, with `lake`
on the PATH and KAFKA_BROKERS pointing at the test broker (the variable the page's lake.yaml reads);
only `make install && source .venv/bin/activate` is left out (this suite runs inside that venv).
Debezium's part is played by the test: the tutorial database's `inventory.customers` and
`inventory.orders` changes are produced to `dbserver1.inventory.*`, the topics the page names.
The oracle is the page's model computed here in Python from those rows."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import envelope

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"
SKIPPED = "make install && source .venv/bin/activate"


def blocks() -> list[str]:
    """The page's bash blocks, in order."""
    return re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S)


class Inventory:
    """The tutorial's tables as the source holds them, and the Debezium events that put them there."""

    def __init__(self) -> None:
        self.customers: dict[int, dict[str, Any]] = {}
        self.orders: dict[int, dict[str, Any]] = {}
        self.pos = 0
        self.events: dict[str, list[dict[str, Any]]] = {"customers": [], "orders": []}

    def put(self, table: str, key: str, row: dict[str, Any]) -> None:
        self.pos += 10
        rows = getattr(self, table)
        before = rows.get(row[key])
        rows[row[key]] = row
        self.events[table].append(envelope("c" if before is None else "u", f"inventory.{table}", before, row, pos=self.pos))

    def flush(self, broker: Any) -> None:
        for table, events in self.events.items():
            broker.produce(f"dbserver1.inventory.{table}", [(None, json.dumps(e).encode()) for e in events])
        self.events = {"customers": [], "orders": []}

    def model(self) -> list[dict[str, Any]]:
        """SELECT c.id, c.email, count(o.order_number), sum(o.quantity) ... JOIN ... GROUP BY c.id, c.email."""
        out = []
        for cid, c in sorted(self.customers.items()):
            mine = [o for o in self.orders.values() if o["purchaser"] == cid]
            if mine:
                out.append({"customer_id": cid, "email": c["email"], "orders": len(mine), "quantity": sum(o["quantity"] for o in mine)})
        return out


def test_the_quick_start_as_written(tmp_path: Path, kafka_broker: Any) -> None:
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    wrapper = bin_dir / "lake"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m framework.cli "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}", "KAFKA_BROKERS": kafka_broker.bootstrap_servers,
           "COLUMNS": "200", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def bash(script: str) -> str:
        # Each block continues in the project folder the first one enters (`cd ~ && lake init shop && cd shop`).
        cwd = home / "shop" if (home / "shop").is_dir() else home
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        out = r.stdout + r.stderr
        assert r.returncode == 0 and "Internal error" not in out and "Traceback" not in out, f"{script}\nexit {r.returncode}\n{out}"
        return r.stdout

    inv = Inventory()
    for cid, (first, last) in enumerate([("Sally", "Thomas"), ("George", "Bailey"), ("Edward", "Walker"), ("Anne", "Kretchmar")], 1001):
        inv.put("customers", "id", {"id": cid, "first_name": first, "last_name": last, "email": f"{first.lower()}@example.com"})
    for n, (purchaser, qty) in enumerate([(1001, 1), (1002, 2), (1002, 2), (1003, 1)], 10001):
        inv.put("orders", "order_number", {"order_number": n, "order_date": 16816 + n % 7, "purchaser": purchaser, "quantity": qty, "product_id": 102})
    for t in ("customers", "orders"):
        kafka_broker.create_topic(f"dbserver1.inventory.{t}")
    inv.flush(kafka_broker)

    *setup, run = blocks()
    assert any(SKIPPED in b for b in setup) and "lake run" in run, "docs/quickstart.md changed its shape: update this test"
    for block in setup:
        bash(block.replace(SKIPPED, "true"))
    lines = [line.split("#", 1)[0].strip() for line in run.splitlines()]
    lines = [line for line in lines if line]
    assert lines[:3] == ["lake run", 'lake sql "select * from dws.orders_per_customer order by customer_id"', "lake ingest"], lines
    bash(lines[0])
    shown = bash(lines[1])
    for row in inv.model():
        assert re.search(rf"{row['customer_id']}\s.*{re.escape(row['email'])}\s.*\b{row['orders']}\b.*\b{row['quantity']}\b", shown), (row, shown)

    # "later, when new changes are in Kafka": an e-mail change and two new orders.
    inv.put("customers", "id", {**inv.customers[1003], "email": "ed@walker.example"})
    inv.put("orders", "order_number", {"order_number": 10005, "order_date": 16820, "purchaser": 1004, "quantity": 3, "product_id": 107})
    inv.put("orders", "order_number", {**inv.orders[10001], "quantity": 5})
    inv.flush(kafka_broker)
    for line in lines[2:]:
        bash(line)
    got = json.loads(bash("lake sql --format json 'select customer_id, email, orders, quantity from dws.orders_per_customer'"))
    assert sorted(got, key=lambda r: r["customer_id"]) == inv.model()
