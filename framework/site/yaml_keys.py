"""The YAML keys of lake's config files as Markdown, read from their pydantic models in models/.

Part of the manual's generated reference (framework/site/reference.py): one table per config
record (key, type, default, description), nested records and lists of records in sections of
their own, linked from the row that holds them. Field order is the model's, with the fields a
record inherits (the table layout of ODS tables and models) after its own.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

_SCALARS = {str: "text", int: "integer", float: "number", bool: "boolean", type(None): "null", Any: "any"}


@dataclass(frozen=True)
class Section:
    """One record at one place in a file: `ods.source` (kind: kafka) is KafkaSourceConfig."""

    path: str  # the YAML path of its keys, e.g. `ods.source` or `schedules[]`
    model: type[BaseModel]
    variant: str | None = None  # the discriminator value when several records share the path

    @property
    def anchor(self) -> str:
        base = self.path.replace("[]", "").replace(".", "-").replace("_", "-") or "top"
        return f"{base}-{self.variant}" if self.variant else base

    @property
    def title(self) -> str:
        return f"`{self.path}` (kind: {self.variant})" if self.variant else f"`{self.path}`"


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic records a field's annotation holds (directly, in a union, list or mapping)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in models_in(arg)]


def _variant(model: type[BaseModel], siblings: list[type[BaseModel]]) -> str | None:
    if len(siblings) < 2:
        return None
    kind = model.model_fields.get("kind")
    args = get_args(kind.annotation) if kind else ()
    return str(args[0]) if args else model.__name__


def _is_list(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType, Annotated):
        return any(_is_list(a) for a in get_args(annotation))
    return origin is list


def ordered_fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """The model's own fields first, then those it inherits from a base other than the root."""
    own = set(model.__dict__.get("__annotations__", {}))
    fields = list(model.model_fields.items())
    return [f for f in fields if f[0] in own] + [f for f in fields if f[0] not in own]


def sections(model: type[BaseModel], path: str = "", skip: frozenset[str] = frozenset()) -> Iterator[Section]:
    """`model` and every record below it, depth first, each at its YAML path. `skip`: paths whose
    records are documented elsewhere (e.g. `checks`, written in forms of their own)."""
    yield Section(path, model)
    for name, f in ordered_fields(model):
        child = f"{path}.{name}" if path else name
        if child in skip:
            continue
        inner = models_in(f.annotation)
        child += "[]" if _is_list(f.annotation) else ""
        for m in inner:
            variant = _variant(m, inner)
            for s in sections(m, child, skip):
                yield Section(s.path, s.model, variant if s.model is m else s.variant)


def type_text(annotation: Any, links: dict[type[BaseModel], str]) -> str:
    """A field's type in words: `text`, `one of cow, mor`, `list of text`, a link to a record."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return type_text(args[0], links)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        parts = [type_text(a, links) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_text(args[0], links)}"
    if origin is dict:
        return f"mapping of {type_text(args[0], links)} to {type_text(args[1], links)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        anchor = links.get(annotation)
        if anchor is None:
            return annotation.__name__
        return f"[{annotation.__name__}]({anchor})" if ".md" in anchor else f"[{annotation.__name__}](#{anchor})"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def default_text(f: FieldInfo) -> str:
    """The default as YAML would write it, `required` when there is none."""
    if f.is_required():
        return "required"
    value = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        dumped = value.model_dump(exclude_defaults=True)
        return f"`{json.dumps(dumped)}`" if dumped else "see its section"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def first_paragraph(model: type[BaseModel]) -> str:
    doc = (model.__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def render(model: type[BaseModel], title: str, skip: frozenset[str] = frozenset(),
           elsewhere: dict[type[BaseModel], str] | None = None) -> str:
    """Markdown: a section per record of `model`'s file (`title`: the file), each a table of its
    keys. `elsewhere`: records documented on another page (`checks.md`), linked there."""
    found = list(sections(model, "", skip))
    links = {**(elsewhere or {}), **{s.model: s.anchor for s in reversed(found)}}  # a record's first place
    out: list[str] = []
    for s in found:
        heading = f"{title} (top level)" if not s.path else s.title
        out += [f"### {heading} {{#{s.anchor}}}", ""]
        intro = first_paragraph(s.model)
        if intro and s.model.__doc__ != BaseModel.__doc__ and intro.strip("`.") != title:
            out += [intro, ""]
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for name, f in ordered_fields(s.model):
            desc = _cell(f.description or "")
            out.append(f"| `{name}` | {_cell(type_text(f.annotation, links))} | {_cell(default_text(f))} | {desc} |")
        out.append("")
    return "\n".join(out)


def undocumented(model: type[BaseModel], skip: frozenset[str] = frozenset()) -> list[str]:
    """YAML paths of the keys under `model` that have no description."""
    return [f"{s.path}.{name}".lstrip(".") for s in sections(model, "", skip)
            for name, f in ordered_fields(s.model) if not (f.description or "").strip()]
