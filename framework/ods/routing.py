"""Which ODS table an event goes to, and the names lake gives tables it creates itself.

An event's routing id is the `source:` string of the table YAML it belongs to: `db.table` from
its source block (MySQL, MariaDB: no `source.schema`), or `db.schema.table` for connectors with
schemas (Postgres, SQL Server, ...). A two-part declaration also takes the events of the default
schema (`public`, `dbo`) unless that schema's three-part name is declared; events of any other
schema route by their three-part name, so same-named tables of two schemas never merge.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from models.config import _IDENT

# Postgres' and SQL Server's default schemas: their tables may be declared as `db.table`.
DEFAULT_SCHEMAS = ("public", "dbo")


def routing_id(source: Column, declared: Collection[str]) -> Column:
    """The routing id of events whose parsed source block (framework.ods.decode.SOURCE) is
    `source`, given the declared `source:` strings; "" without db and table."""
    schema = source["schema"]
    two = F.concat_ws(".", source["db"], source["table"])
    three = F.concat_ws(".", source["db"], schema, source["table"])
    three_declared = [s for s in declared if s.count(".") == 2]
    return (
        F.when(schema.isNull() | (schema == ""), two)
        .when(three.isin(three_declared) if three_declared else F.lit(False), three)
        .when(schema.isin(*DEFAULT_SCHEMAS), two)
        .otherwise(three)
    )


def undeclared_parts(db: str, schema: str | None, table: str) -> list[str]:
    """The parts of an undeclared table's routing id (as `routing_id` builds it)."""
    return [db, table] if not schema or schema in DEFAULT_SCHEMAS else [db, schema, table]


def auto_table_name(source: str, parts: Sequence[str], taken: Collection[str]) -> str | None:
    """The ODS name `auto_create` gives the undeclared source table `source` (its parts, db
    [schema] table, as the event names them), or None when no declaration could name it.

    The name is the table part made an identifier (lower case; other characters -> `_`); when
    that is no identifier (a leading digit), means nothing (no letter or digit) or is `taken`,
    `<schema>_<table>` (three parts), `<db>_<table>` or `<db>_<schema>_<table>`; then the last
    with a hash of the source, so it never reuses a taken name and depends only on the source
    and `taken`."""
    if any("." in p for p in parts):
        # `source:` splits on '.', so a declaration could not name this table.
        return None

    def ident(text: str) -> str:
        return re.sub(r"[^a-z0-9_]", "_", text.lower())

    candidates = list(dict.fromkeys(ident("_".join(parts[i:])) for i in range(len(parts) - 1, -1, -1)))
    for name in candidates:
        if _IDENT.match(name) and re.search(r"[a-z0-9]", name) and name not in taken:
            return name
    base = candidates[-1] if _IDENT.match(candidates[-1]) else "t_" + candidates[-1]
    digest = hashlib.sha256(source.encode()).hexdigest()
    for n in range(8, len(digest) + 1):
        name = f"{base}_{digest[:n]}"
        if name not in taken:
            return name
    return None
