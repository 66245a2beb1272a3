"""dbt's node selection grammar, over lake's model graph (no Spark, no I/O but `state:`).

    lake build 'tag:finance,layer:dws' dws.user_agg+ --exclude 'path:layers/dws/tmp'

- Arguments, and words separated by spaces within one argument, are a **union**.
- Within a word, commas are an **intersection**: `tag:finance,layer:dws` is the DWS models
  tagged finance. (lake used to read a comma as a union; a word of model names whose
  intersection is empty is an error that says so.)
- Each part is a method and a value, with graph operators around it:
  `dws.user_agg` (a model, ODS or external table by name), `layer:dws`, `tag:finance`,
  `path:layers/dws` (a folder) or `path:layers/dws/units.sql` (a file; its YAML too),
  `state:modified` (data or metadata fingerprint differs from the one in the table's last
  commit, or no commit yet), `state:new` (no commit yet);
  `+x` with all ancestors, `2+x` with ancestors up to two edges away, `x+` / `x+1` likewise
  for descendants, `@x`: x, its descendants and all their ancestors (what building them needs).
- `--exclude` takes the same grammar and removes what it selects.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from framework.errors import LakeError
from framework.transform.loader import Model

# What the last commit of a model's table records: (data fingerprint, metadata fingerprint), or
# None when the table has no commit. Values may be None (written before lake recorded them).
Recorded = Callable[[str], "tuple[str | None, str | None] | None"]
# The last build's (or run's) model results, model -> mode, and the run's id; None: no such run.
LastResults = Callable[[], "tuple[str, Mapping[str, str]] | None"]

# The modes each `result:` value means in the last run's model results (models/records.py).
RESULTS = {"error": ("failed",), "skipped": ("skipped",), "success": ("full", "incremental", "recompute", "restate", "noop")}
METHODS = ("layer", "tag", "path", "state", "result")
STATES = ("modified", "new")
_PART = re.compile(r"^(?P<at>@)?(?:(?P<up>\d*)\+)?(?P<body>[^+]+?)(?:\+(?P<down>\d*))?$")
_GUIDE = "e.g. dws.user_agg, +dws.user_agg, dws.user_agg+2, @dws.user_agg, tag:finance,layer:dws, path:layers/dws, state:modified"


@dataclass(frozen=True)
class Universe:
    """What selectors choose from: the graph (ODS tables and models), the models, the project
    root (for `path:`), which YAML declares each ODS table, and the tables' recorded state."""

    graph: nx.DiGraph
    models: Mapping[str, Model]
    root: Path | None = None
    ods_files: Mapping[str, str] = field(default_factory=dict)  # ods table name (no layer) -> layers/ods/x.yaml
    recorded: Recorded | None = None
    results: LastResults | None = None
    externals: Mapping[str, str] = field(default_factory=dict)  # external table -> layers/external/x.yaml


@dataclass(frozen=True)
class Part:
    """One method:value with its graph operators (None: no operator; -1: unlimited depth)."""

    text: str  # as written
    method: str | None
    value: str
    up: int | None = None
    down: int | None = None
    at: bool = False


def parse(selector: str) -> list[list[Part]]:
    """A selector argument as its union of words, each an intersection of parts."""
    words = selector.split()
    if not words:
        raise LakeError(f"empty selector {selector!r}", fix=f"name models or methods, {_GUIDE}")
    return [[_part(p, w) for p in w.split(",")] for w in words]


def _part(text: str, word: str) -> Part:
    m = _PART.match(text)
    if not text or m is None:
        raise LakeError(f"selector {word!r}: cannot read {text!r}", fix=f"use the dbt selector grammar, {_GUIDE}")
    if m["at"] and m["up"] is not None:
        raise LakeError(f"selector {text!r}: `@` and a leading `+` together", fix="`@x` already takes every ancestor its descendants need; drop the `+`")
    method, sep, value = m["body"].partition(":")
    if not sep:
        method, value = "", m["body"]
    if sep and method not in METHODS:
        hint = difflib.get_close_matches(method, METHODS, n=1)
        raise LakeError(f"selector {text!r}: unknown method `{method}:`",
                        fix=(f"did you mean `{hint[0]}:`? " if hint else "") + f"methods: {', '.join(m + ':' for m in METHODS)}; or a model name")
    if not value:
        raise LakeError(f"selector {text!r}: `{method}:` needs a value", fix=f"e.g. {method}:" + {"layer": "dws", "tag": "finance", "path": "layers/dws", "state": "modified", "result": "error"}[method])
    return Part(text, method or None, value, _depth(m["up"]), _depth(m["down"]), bool(m["at"]))


def _depth(digits: str | None) -> int | None:
    if digits is None:
        return None
    return int(digits) if digits else -1


def select(u: Universe, selectors: Iterable[str], exclude: Iterable[str] = (), *, nodes: bool = False) -> list[str]:
    """What the selectors choose minus what `exclude` chooses, in dependency order: models only,
    or with `nodes` ODS tables too. No selector: every model (and, with `nodes`, ODS table)."""
    selectors, exclude = list(selectors), list(exclude)
    allowed = set(u.graph) if nodes else set(u.models)
    chosen = union(u, selectors) if selectors else set(allowed)
    chosen -= union(u, exclude)
    return [n for n in nx.lexicographical_topological_sort(u.graph) if n in chosen and n in allowed]


def union(u: Universe, selectors: Iterable[str]) -> set[str]:
    """The nodes (ODS tables and models) the selectors choose."""
    out: set[str] = set()
    for s in selectors:
        for word in parse(s):
            out |= _intersection(u, word)
    return out


def _intersection(u: Universe, word: list[Part]) -> set[str]:
    sets = [_expand(u, p, _match(u, p)) for p in word]
    out = set.intersection(*sets)
    names = [p.text for p in word]
    if not out and len(word) > 1 and all(p.method is None for p in word):
        raise LakeError(
            f"selector {','.join(names)!r} selects nothing: a comma means intersection (as in dbt), "
            f"and no model is all of {', '.join(names)} (lake used to read a comma as a union)",
            fix=f"for the union, separate them with spaces: `lake build {' '.join(names)}` (see CHANGELOG)")
    return out


def _expand(u: Universe, p: Part, base: set[str]) -> set[str]:
    g, out = u.graph, set(base)
    if p.at:
        down = set(base).union(*(nx.descendants(g, n) for n in base))
        return down.union(*(nx.ancestors(g, n) for n in down))
    for n in base:
        if p.up is not None:
            out |= _within(g.reverse(copy=False), n, p.up)
        if p.down is not None:
            out |= _within(g, n, p.down)
    return out


def _within(g: nx.DiGraph, n: str, depth: int) -> set[str]:
    if depth < 0:
        return set(nx.descendants(g, n))
    return set(nx.single_source_shortest_path_length(g, n, cutoff=depth))


def _match(u: Universe, p: Part) -> set[str]:
    models = u.models
    if p.method == "layer":
        return {n for n, d in u.graph.nodes(data=True) if d.get("layer") == p.value}
    if p.method == "tag":
        return {m.name for m in models.values() if p.value in m.config.tags} | {
            n for n, d in u.graph.nodes(data=True) if d.get("kind") == "external" and p.value in d.get("tags", ())}
    if p.method == "path":
        return _by_path(u, p.value)
    if p.method == "state":
        return _by_state(u, p.value)
    if p.method == "result":
        return _by_result(u, p.value)
    name = p.value.lower()
    if name not in u.graph:
        hint = difflib.get_close_matches(name, sorted(u.graph), n=1)
        kind = "ODS table" if name.startswith("ods.") else "external table" if name.startswith("external.") else "model"
        raise LakeError(f"no {kind} named {name}", fix=f"did you mean {hint[0]}?" if hint else "list models and tables with `lake dag`")
    return {name}


def _by_path(u: Universe, value: str) -> set[str]:
    """Models whose file (or YAML) is the path or lies under it; ODS and external tables whose YAML does."""
    if u.root is None:
        raise LakeError(f"path:{value} needs the project", fix="report this as a lake bug (a selection without its project)")
    root = u.root.resolve()
    target = (root / value).resolve()
    if not target.exists():
        raise LakeError(f"path:{value}: no such file or folder in the project ({target})",
                        fix="give a path relative to the project root, e.g. path:layers/dws or path:layers/dws/user_agg.sql")

    def inside(p: Path) -> bool:
        p = p.resolve()
        return p == target or target in p.parents

    out = {m.name for m in u.models.values() if inside(m.path) or (m.config_path is not None and inside(m.config_path))}
    return out | {f"ods.{t}" for t, rel in u.ods_files.items() if inside(root / rel)} | {
        n for n, rel in u.externals.items() if inside(root / rel)}


def _by_state(u: Universe, value: str) -> set[str]:
    if value not in STATES:
        raise LakeError(f"state:{value} is not a state lake knows", fix=f"use one of {', '.join('state:' + s for s in STATES)}")
    if u.recorded is None:
        raise LakeError(f"state:{value} needs the tables' last commits", fix="report this as a lake bug (a selection without the warehouse)")
    out = set()
    for m in u.models.values():
        rec = u.recorded(m.name)
        if rec is None or (value == "modified" and _modified(m, *rec)):
            out.add(m.name)
    return out


def _by_result(u: Universe, value: str) -> set[str]:
    if value not in RESULTS:
        raise LakeError(f"result:{value} is not a result lake records", fix=f"use one of {', '.join('result:' + r for r in RESULTS)}")
    last = u.results() if u.results is not None else None
    if last is None:
        raise LakeError(f"result:{value} needs a previous build: the run history has no build or run that built a model",
                        fix="run `lake build` (or `lake run`) first; `lake runs` lists the history")
    _run_id, modes = last
    return {m for m, mode in modes.items() if mode in RESULTS[value] and m in u.models}


def _modified(m: Model, data: str | None, metadata: str | None) -> bool:
    """Whether the model differs from its table's last commit. A fingerprint of an older lake
    (no metadata hash recorded) covers the query and the YAML but checks: it counts as equal."""
    if not m.same_data(data):
        return True
    return metadata is not None and metadata != m.metadata_fingerprint
