"""Declared external tables: `layers/external/<name>.yaml` (models/external_config.py) names a
table lake reads but never writes, `external.<name>`. The files are loaded with the project
(framework/project/config.py), so a bad declaration is a config error before any session starts;
reading the table and telling whether it changed is framework/transform/external.py's job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.runtime.location import Location
from models.external_config import ExternalConfig

EXTERNAL_LAYER = "external"


@dataclass(frozen=True)
class ExternalTable:
    """One declared external table: its name (`external.<stem>`), declaring file and config."""

    name: str
    rel: str  # layers/external/<stem>.yaml
    config: ExternalConfig
    location: Location | None  # `path:`, resolved against the project root; None for a catalog table

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def where(self) -> str:
        """What it reads, as a user would write it: `hudi table /x`, `parquet files s3a://b/x`, `catalog table db.t`."""
        if self.location is None:
            return f"catalog table {self.config.table}"
        return f"{'hudi table' if self.kind == 'hudi' else 'parquet files'} {self.location}"


def is_external(name: str) -> bool:
    """Whether a table name is a declared external's (the layer `external` is theirs alone)."""
    return name.startswith(EXTERNAL_LAYER + ".")


def external_files(root: Path) -> list[Path]:
    """The declarations under `layers/external/`, by name."""
    d = root / "layers" / EXTERNAL_LAYER
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.suffix in (".yaml", ".yml") and not p.name.startswith(("_", ".")))
