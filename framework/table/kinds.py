"""The kinds of lake table, each one function from its declaration to its `LakeTable`.

A kind says where the table lives (framework/runtime/paths.py), its Hudi name, key, ordering,
partition, layout, whether downstream readers need its changes (CDC), whether it is registered
in the catalog, and the failpoints around its commits. Adding a kind is one function here plus
its entry in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table.lake_table import LakeTable, ProjectDefaults, TableSpec
from models.config import ModelConfig, OdsTable

DEAD_LETTER_KEY = ("loc",)


def ods(layout: Layout, defaults: ProjectDefaults, t: OdsTable) -> LakeTable:
    """An ODS table: the source table's live rows, ordered by `_seq`, registered as `ods.<name>`.
    A bootstrap's first commit is a bulk insert (framework/ods/bootstrap.py says so itself)."""
    spec = TableSpec("ods", t.table_name, tuple(t.key), "_seq", t.partition_by.derived_name if t.partition_by else None,
                     layout=t, sql_name=t.qualified_name, before="before_table_commit", after="after_table_commit")
    return LakeTable(spec, layout.table(t.qualified_name), defaults)


def bootstrap(layout: Layout, defaults: ProjectDefaults, t: OdsTable) -> LakeTable:
    """An ODS table written from a full dump (framework/ods/bootstrap.py): a new table's commit is a
    bulk insert, with its own failpoint."""
    table = ods(layout, defaults, t)
    return table.at(table.location, kind="bootstrap", before="before_bootstrap_commit", after=None, first_operation="bulk_insert")


def tombstones(layout: Layout, defaults: ProjectDefaults, t: OdsTable, key: list[str] | None = None) -> LakeTable:
    """The keys an ODS table deleted and the position of each delete (framework/ods/tombstones.py)."""
    spec = TableSpec("tombstones", f"{t.table_name}_tombstones", tuple(key or t.key), "_seq", cdc=False)
    return LakeTable(spec, layout.tombstones(t.qualified_name), defaults)


def history(layout: Layout, defaults: ProjectDefaults, t: OdsTable) -> LakeTable:
    """`ods.<name>_history` (`history: true`): one row per version of each key, keyed by the key
    and the version's `_seq` (framework/ods/history.py); models read its changes like an ODS table's."""
    assert t.history_name is not None
    spec = TableSpec("history", f"{t.table_name}_history", (*t.key, "_seq"), "_seq", sql_name=t.history_name,
                     before="before_history_commit", after="after_history_commit")
    return LakeTable(spec, layout.table(t.history_name), defaults)


def model_history(layout: Layout, defaults: ProjectDefaults, name: str, key: tuple[str, ...]) -> LakeTable:
    """`<layer>.<name>_history` of a model with `history: true`: its output's versions across
    builds, keyed by the output key and each version's `_seq` (framework/transform/model_history.py)."""
    spec = TableSpec("history", f"{name.replace('.', '_')}_history", (*key, "_seq"), "_seq", sql_name=f"{name}_history",
                     before="before_history_commit", after="after_history_commit")
    return LakeTable(spec, layout.table(f"{name}_history"), defaults)


def dead_letter(layout: Layout, defaults: ProjectDefaults) -> LakeTable:
    """`_lake.dead_letter`: events no table could take, keyed by their location."""
    spec = TableSpec("dead_letter", "dead_letter", DEAD_LETTER_KEY, "_seq", cdc=False, sql_name="_lake.dead_letter")
    return LakeTable(spec, layout.dead_letter, defaults)


def model(layout: Layout, defaults: ProjectDefaults, name: str, config: ModelConfig) -> LakeTable:
    """A DWD/DWS model's table, keyed by `_lake_key`; its first commit is an insert."""
    spec = TableSpec("model", name.replace(".", "_"), ("_lake_key",), None, config.partition_by, layout=config, sql_name=name,
                     before="before_model_commit", after="after_model_commit", first_operation="insert")
    return LakeTable(spec, layout.table(name), defaults)


def hidden(layout: Layout, defaults: ProjectDefaults, name: str) -> LakeTable:
    """The groups an aggregate model hides (framework/transform/hidden.py); first commit an insert."""
    spec = TableSpec("hidden", name.replace(".", "_") + "_hidden", ("_lake_key",), None, cdc=False, first_operation="insert")
    return LakeTable(spec, layout.hidden(name), defaults)


def quarantine(layout: Layout, defaults: ProjectDefaults, name: str, key: tuple[str, ...]) -> LakeTable:
    """Rows a `drop` check rejected, keyed by run id and the row's identity (framework/quality/quarantine.py)."""
    flat = name.replace(".", "_")
    spec = TableSpec("quarantine", f"quarantine_{flat}", key, None, cdc=False, sql_name=f"_quarantine.{flat}",
                     after="after_quarantine_write")
    return LakeTable(spec, layout.quarantine(name), defaults)


def staged(table: LakeTable, location: Location) -> LakeTable:
    """A copy of `table` being staged at `location` (framework/ods/rewrite.py): bulk-inserted,
    never registered in the catalog, no failpoints of the table's own commits."""
    return table.at(location, kind="staged", sql_name=None, before=None, after=None, first_operation="bulk_insert")


def plain(location: Location, name: str, key: list[str], defaults: ProjectDefaults | None = None) -> LakeTable:
    """A table written the way lake writes one, without a kind of its own (the upstream tables of
    a model's unit test, framework/modeltest/incremental.py)."""
    return LakeTable(TableSpec("plain", name, tuple(key)), location, defaults or ProjectDefaults())


KINDS: dict[str, Callable[..., LakeTable]] = {
    "ods": ods, "bootstrap": bootstrap, "tombstones": tombstones, "history": history, "model_history": model_history, "dead_letter": dead_letter, "model": model, "hidden": hidden,
    "quarantine": quarantine, "staged": staged, "plain": plain,
}
