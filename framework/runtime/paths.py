"""Where things live in a warehouse (a local folder or a Hadoop URI such as s3a://bucket/wh)."""

from __future__ import annotations

from pathlib import Path

from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.storage import Storage, storage_for
from models.config import _IDENT


class Layout:
    """Paths of a warehouse: one Hudi table per folder under the layer name."""

    def __init__(self, warehouse: Location | Path) -> None:
        self.root = warehouse if isinstance(warehouse, Location) else Location.parse(warehouse)

    @property
    def fs(self) -> Storage:
        """The warehouse's file operations (Hadoop's FileSystem unless it is on the local disk)."""
        return storage_for(self.root)

    def table(self, qualified: str) -> Location:
        layer, name = _parts(qualified)
        return self.root / layer / name

    @property
    def lake(self) -> Location:
        return self.root / "_lake"

    def pinned(self, qualified: str) -> str | None:
        """The completion time a build reads `qualified` as of, when it is pinned (an environment
        reading production: framework/envs/layout.py); None: its latest commit."""
        return None

    @property
    def dead_letter(self) -> Location:
        return self.lake / "dead_letter"

    def checkpoint(self, name: str) -> Location:
        return self.lake / "checkpoints" / name

    def hidden(self, qualified: str) -> Location:
        """The hidden-groups Hudi table of an aggregate model, `_lake/hidden/<layer>_<name>`: the
        groups HAVING or a `drop` check hides, with their state (framework/transform/hidden.py)."""
        return self.lake / "hidden" / "_".join(_parts(qualified))

    @property
    def locks(self) -> Location:
        return self.lake / "locks"

    @property
    def runs(self) -> Location:
        return self.lake / "runs"

    def quality(self, run_id: str) -> Location:
        """Validation results of one run: one `<model>.json` per model or ODS table."""
        return self.lake / "quality" / run_id

    def tombstones(self, qualified: str) -> Location:
        """The tombstone Hudi table of an ODS table (`_lake/tombstones/<layer>_<name>`): the keys it
        deleted and the source position of each delete (framework/ods/tombstones.py)."""
        return self.lake / "tombstones" / "_".join(_parts(qualified))

    def rebuild_record(self, qualified: str) -> Location:
        """When and why a table was last written anew (framework/runtime/rebuilds.py)."""
        return self.lake / "rebuilds" / ("_".join(_parts(qualified)) + ".json")

    def rebuild_pending(self, qualified: str) -> Location:
        """Written when `lake ingest --rebuild` starts on a table, removed when it finished."""
        return self.lake / "rebuilds" / ("_".join(_parts(qualified)) + ".pending")

    def staging(self, qualified: str) -> Location:
        """Where a table's rewrite is staged before it replaces the table (framework/ods/rewrite.py)."""
        return self.lake / "staging" / "_".join(_parts(qualified))

    @property
    def quarantine_root(self) -> Location:
        return self.root / "_quarantine"

    def quarantine(self, qualified: str) -> Location:
        """The quarantine Hudi table of a model or ODS table: `_quarantine/<layer>_<name>`."""
        return self.quarantine_root / "_".join(_parts(qualified))

    def layer_tables(self, layer: str) -> list[Location]:
        return self.tables_under(self.root / layer)

    def tables_under(self, folder: Location) -> list[Location]:
        """The Hudi tables directly under `folder`."""
        fs = self.fs
        return [p for p in fs.children(folder) if fs.exists(p / ".hoodie" / "hoodie.properties")]


def _parts(qualified: str) -> tuple[str, str]:
    """Layer and name of `<layer>.<name>`; both identifiers, so the folder stays in the warehouse
    (config validation sees to that first: this guards every other way a name comes in)."""
    layer, _, name = qualified.partition(".")
    if not (_IDENT.match(layer) and _IDENT.match(name)):
        raise LakeError(
            f"{qualified!r} is not <layer>.<name> of letters, digits and underscores, so it names no "
            "folder of the warehouse",
            fix="give the ODS table a `name:` of letters, digits and underscores (a model: rename its file)",
        )
    return layer, name
