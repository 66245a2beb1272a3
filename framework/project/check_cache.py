"""Checks already validated against Great Expectations' registry, so that loading a project whose
checks have not changed imports no GE (3-5 s of every `lake` command of a project with checks).

One JSON file per GE version beside the jar cache (`.cache/checks/gx-<version>.json`, or beside
`$LAKE_JAR_CACHE`): each `checks:` item that validated without a problem, by its JSON text, with
the CheckSpecs it gave. The same item under the same GE version always gives the same specs, so a
hit is the validation's answer. Items whose YAML values JSON cannot keep as they are (dates, for
example) and items with problems are never stored: they are validated every time. A file that
cannot be read or written is ignored (validation runs as before); writes replace the file whole.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from framework.runtime.jars import cache_dir
from models.quality import CheckSpec

MAX_ITEMS = 5000  # a file that grew past this starts again


def _key(item: object) -> str | None:
    """The item's JSON text, or None when JSON would change a value (the item is not cached)."""
    try:
        text = json.dumps(item, sort_keys=True)
    except (TypeError, ValueError):
        return None
    return text if json.loads(text) == item else None


class ValidatedChecks:
    """The cache of one GE version (module docstring); `get` and `put` by `checks:` item."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.items: dict[str, list[dict[str, Any]]] = {}
        self.changed = False
        if path is not None:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.items = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self.items = {}

    @classmethod
    def open(cls, folder: Path | None = None) -> ValidatedChecks:
        try:
            version = metadata.version("great_expectations")
        except metadata.PackageNotFoundError:
            return cls(None)
        return cls((folder or cache_dir().parent / "checks") / f"gx-{version}.json")

    def get(self, item: object) -> list[CheckSpec] | None:
        key = _key(item)
        found = self.items.get(key) if key is not None else None
        if not isinstance(found, list):
            return None
        try:
            return [CheckSpec.model_validate(s) for s in found]
        except ValueError:
            return None

    def put(self, item: object, specs: list[CheckSpec]) -> None:
        key = _key(item)
        dumped = [s.model_dump(mode="json") for s in specs]
        if key is None or self.path is None or any(CheckSpec.model_validate(d) != s for d, s in zip(dumped, specs, strict=True)):
            return
        if len(self.items) >= MAX_ITEMS:
            self.items = {}
        self.items[key] = dumped
        self.changed = True

    def save(self) -> None:
        if not self.changed or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.items, f)
            os.replace(tmp, self.path)
        except OSError:
            return
        self.changed = False
