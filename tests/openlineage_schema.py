"""Validate OpenLineage events against the specification's own JSON schemas: the event against
OpenLineage.json, each facet against the schema its `_schemaURL` names, which must be one of those
files at that very version. The schemas are the OpenLineage project's (no PyPI package ships them):
they live beside the repository in ../shared/openlineage/ (its README gives their provenance), as
the public Debezium captures do, and are not part of lake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "openlineage"


def available() -> None:
    """Skip the calling test when the schemas are not beside the repository."""
    if not (SCHEMAS / "OpenLineage.json").is_file():
        from tests.strict_skips import optional

        optional("needs ../shared/openlineage (the OpenLineage spec's JSON schemas) beside the repo")


def _registry() -> tuple[Registry, dict[str, Any]]:
    docs = {}
    for p in SCHEMAS.glob("*.json"):
        doc = json.loads(p.read_text())
        docs[doc["$id"]] = doc
    return Registry().with_resources((i, Resource.from_contents(d)) for i, d in docs.items()), docs


def _check(ref: str, instance: Any, registry: Registry) -> list[str]:
    v = Draft202012Validator({"$ref": ref}, registry=registry)
    return [f"{ref}: {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(instance)]


def problems(event: dict[str, Any]) -> list[str]:
    """Every way `event` breaks the spec (empty: valid); a facet whose schema is not here is one."""
    available()
    registry, docs = _registry()
    core = next(i for i in docs if i.endswith("/OpenLineage.json"))
    out = _check(f"{core}#/$defs/RunEvent", event, registry)
    facets: list[dict[str, Any]] = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for ds in [*event.get("inputs", []), *event.get("outputs", [])]:
        facets += [*ds.get("facets", {}).values(), *ds.get("outputFacets", {}).values(), *ds.get("inputFacets", {}).values()]
    for f in facets:
        base = f["_schemaURL"].split("#")[0]
        if base not in docs:
            out.append(f"no schema here for {f['_schemaURL']} (../shared/openlineage/)")
            continue
        out += _check(f["_schemaURL"], f, registry)
    return out
