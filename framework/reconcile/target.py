"""Which source table an ODS table mirrors and how to reach it: the `<db>` of its `source:`
picks `reconcile.sources.<db>` of lake.yaml; the rest names the table (MariaDB/MySQL
`<db>.<table>`; PostgreSQL `<db>.<schema>.<table>`, `public` when left out)."""

from __future__ import annotations

from dataclasses import dataclass

from framework.errors import ConfigError, ConfigIssue
from framework.project.config import Project
from models.config import OdsTable
from models.reconcile import ReconcileSettings, SourceDatabase

_EXAMPLE = ("reconcile:\n    sources:\n      {db}:\n        dialect: mariadb   # or postgres\n        host: ${{{var}_HOST}}\n"
            "        user: ${{{var}_USER}}\n        password: ${{{var}_PASSWORD}}")


@dataclass(frozen=True)
class SourceTarget:
    """The database settings and the table's name parts in it (schema or database, table)."""

    db_name: str
    settings: SourceDatabase
    parts: tuple[str, str]


def settings_of(project: Project) -> ReconcileSettings:
    return project.config.reconcile or ReconcileSettings()


def target_of(project: Project, t: OdsTable) -> SourceTarget:
    """The source table of `t`; a ConfigError naming lake.yaml, the field and the fix when its
    database has no settings."""
    parts = t.source.split(".")
    db = parts[0]
    src = settings_of(project).sources.get(db)
    if src is None:
        var = db.upper()
        raise ConfigError([ConfigIssue("lake.yaml", None, f"reconcile.sources.{db}",
                                       f"no connection settings for the database {db!r} of {t.qualified_name} (source: {t.source})",
                                       "add them, secrets as ${VAR}:\n  " + _EXAMPLE.format(db=db, var=var))])
    if src.dialect == "postgres":
        schema, table = (parts[1], parts[2]) if len(parts) == 3 else ("public", parts[1])
        return SourceTarget(db, src, (schema, table))
    if len(parts) != 2:
        raise ConfigError([ConfigIssue(project.ods_files.get(t.table_name, "layers/ods/"), None, "source",
                                       f"{t.source}: a {src.dialect} table is `<db>.<table>`",
                                       f"write `source: {db}.{parts[-1]}`, or set dialect: postgres for reconcile.sources.{db}")])
    return SourceTarget(db, src, (db, parts[1]))


def signal_sources(project: Project) -> list[str]:
    """The routing ids of the signal tables lake.yaml names (ReconcileSettings.signal_sources)."""
    return settings_of(project).signal_sources()
