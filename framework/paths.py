"""Where things live in a warehouse."""

from __future__ import annotations

from pathlib import Path

from framework.errors import LakeError
from models.config import _IDENT


class Layout:
    """Paths of a warehouse: one Hudi table per folder under the layer name."""

    def __init__(self, warehouse: Path) -> None:
        self.root = warehouse

    def table(self, qualified: str) -> Path:
        layer, name = _parts(qualified)
        return self.root / layer / name

    @property
    def lake(self) -> Path:
        return self.root / "_lake"

    @property
    def dead_letter(self) -> Path:
        return self.lake / "dead_letter"

    def checkpoint(self, name: str) -> Path:
        return self.lake / "checkpoints" / name

    def hidden(self, qualified: str) -> Path:
        """The hidden-groups Hudi table of an aggregate model, `_lake/hidden/<layer>_<name>`: the
        groups HAVING or a `drop` check hides, with their state (framework/transform/hidden.py)."""
        return self.lake / "hidden" / "_".join(_parts(qualified))

    @property
    def locks(self) -> Path:
        return self.lake / "locks"

    @property
    def runs(self) -> Path:
        return self.lake / "runs"

    def quality(self, run_id: str) -> Path:
        """Validation results of one run: one `<model>.json` per model or ODS table."""
        return self.lake / "quality" / run_id

    @property
    def quarantine_root(self) -> Path:
        return self.root / "_quarantine"

    def quarantine(self, qualified: str) -> Path:
        """The quarantine Hudi table of a model or ODS table: `_quarantine/<layer>_<name>`."""
        return self.quarantine_root / "_".join(_parts(qualified))

    def layer_tables(self, layer: str) -> list[Path]:
        d = self.root / layer
        if not d.is_dir():
            return []
        return sorted(p for p in d.iterdir() if (p / ".hoodie" / "hoodie.properties").exists())


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
