"""Which ODS table an event goes to, and the names lake gives tables it creates itself."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from models.config import _IDENT


def auto_table_name(source: str, db: str, table: str, taken: Collection[str]) -> str | None:
    """The ODS name `auto_create` gives the undeclared source table `source` (its db and table
    parts as the event names them), or None when no declaration could name the source.

    The name is the table part made an identifier (lower case; other characters -> `_`); when
    that is no identifier (a leading digit), means nothing (no letter or digit) or is `taken`,
    `<db>_<table>`; then that with a hash of the source, so it never reuses a taken name and
    depends only on the source and `taken`."""
    if "." in db or "." in table:
        # `source:` splits on '.', so a declaration could not name this table.
        return None

    def ident(text: str) -> str:
        return re.sub(r"[^a-z0-9_]", "_", text.lower())

    candidates = [ident(table), ident(f"{db}_{table}")]
    for name in candidates:
        if _IDENT.match(name) and re.search(r"[a-z0-9]", name) and name not in taken:
            return name
    base = candidates[1] if _IDENT.match(candidates[1]) else "t_" + candidates[1]
    digest = hashlib.sha256(source.encode()).hexdigest()
    for n in range(8, len(digest) + 1):
        name = f"{base}_{digest[:n]}"
        if name not in taken:
            return name
    return None
