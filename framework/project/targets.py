"""Environments and secrets in the YAML lake reads: `targets:` of lake.yaml and `${VAR}`.

Both work on the composed YAML node tree, before any value is parsed into a model, so every
error (pydantic's included) still names the line it comes from:

- A target (`targets: {dev: {...}}`, chosen by `--target`, `LAKE_TARGET` or `default_target:`) is
  deep-merged over the top-level mapping: mappings merge key by key, anything else replaces, and a
  mapping whose `kind:` differs from the top level's (another source or catalog kind) replaces it
  whole. Only the keys of :data:`ALLOWED` may be overridden: what differs between environments.
- `${VAR}` and `${VAR:-default}` in scalar values (never keys, never comments) are replaced by the
  environment's value (`:-` also when it is empty, as in the shell); `$${` is a literal `${`. An
  environment value stays a string (the models convert "8" or "true" where a field wants one) and
  is never parsed as YAML, so it cannot add keys. Values taken from the environment may be secrets:
  :func:`redact` puts the variable's name back wherever a message would show one (values of
  variables or fields named like secrets, and any value of 16 characters or more: `_may_be_secret`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from framework.errors import ConfigIssue
from models.reconcile import SourceDatabase

ENV_VAR = "LAKE_TARGET"
# What a target may override; None: the whole subtree (new keys of those sections need no change here).
ALLOWED: dict[str, dict[str, None] | None] = {
    "warehouse": None, "spark": None, "ods": {"source": None}, "catalog": None, "locks": None, "hudi": None,
}
ALLOWED_TEXT = "warehouse, spark, ods.source, catalog, locks, hudi"

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_INNER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


@dataclass(frozen=True)
class Request:
    """A target asked for by name, and who asked (`--target` or `LAKE_TARGET`)."""

    name: str
    by: str


def requested(flag: str | None) -> Request | None:
    """The target the command line or the environment asks for (the flag wins)."""
    if flag:
        return Request(flag, "--target")
    env = os.environ.get(ENV_VAR, "").strip()
    return Request(env, ENV_VAR) if env else None


@dataclass
class Document:
    """One YAML file, its target applied and its variables expanded."""

    node: yaml.Node | None
    data: object
    target: str | None = None
    issues: list[ConfigIssue] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # environment value -> variable name


def read_yaml(text: str, rel: str, *, targets: bool = False, request: Request | None = None, expand: bool = True) -> Document:
    """Parse `text` (raises yaml.YAMLError); with `targets`, apply lake.yaml's chosen target; with
    `expand` off, keep every `${VAR}` as written (for a copy of the file: no secret in it)."""
    node = yaml.compose(text)
    doc = Document(node, None)
    if targets and isinstance(node, yaml.MappingNode):
        node, doc.target = _apply_target(node, rel, request, doc)
        doc.node = node
    elif request is not None and request.by != ENV_VAR and targets:
        doc.issues.append(_no_targets(rel, request))
    if node is not None and expand:
        _expand(node, rel, (), doc, set())
    if doc.issues:
        return doc
    doc.data = yaml.SafeLoader("").construct_document(node) if node is not None else None
    return doc


def redact(issue: ConfigIssue, secrets: dict[str, str]) -> ConfigIssue:
    """`issue` with every value that came from the environment shown as `${NAME}` instead."""
    problem, fix = issue.problem, issue.fix
    for value in sorted(secrets, key=len, reverse=True):
        # Whole words only: a value such as `1` must not turn the `1` of `tables[1]` into a name.
        pat = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])")
        name = "${" + secrets[value] + "}"
        problem, fix = pat.sub(lambda _m: name, problem), pat.sub(lambda _m: name, fix)  # noqa: B023 - used at once
    return ConfigIssue(issue.file, issue.line, issue.field, problem, fix)


# --- ${VAR} -------------------------------------------------------------------------------------


def _expand(node: yaml.Node, rel: str, loc: tuple[str, ...], doc: Document, seen: set[int]) -> None:
    """Replace the references in every scalar value under `node` (aliases expanded once)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _expand(v, rel, (*loc, str(k.value) if isinstance(k, yaml.ScalarNode) else "?"), doc, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _expand(v, rel, (*loc[:-1], f"{loc[-1] if loc else ''}[{i}]"), doc, seen)
    elif isinstance(node, yaml.ScalarNode) and isinstance(node.value, str) and "${" in node.value:
        node.value = _REF.sub(lambda m: _substitute(m, node, rel, loc, doc), node.value)


def _substitute(m: re.Match[str], node: yaml.ScalarNode, rel: str, loc: tuple[str, ...], doc: Document) -> str:
    if m.group(0) == "$${":
        return "${"
    line = node.start_mark.line + 1
    if node.style == "|":  # a literal block: its lines are the file's, after the indicator line
        line += 1 + node.value.count("\n", 0, m.start())
    where = ".".join(loc) or "(root)"
    inner = _INNER.fullmatch(m.group(1))
    if inner is None:
        doc.issues.append(ConfigIssue(rel, line, where, f"{m.group(0)!s} is not a variable reference",
                                      "write ${NAME} or ${NAME:-default} (NAME: letters, digits, '_'); for a literal '${' write '$${'"))
        return m.group(0)
    name, default = inner.group(1), inner.group(2)
    value = os.environ.get(name)
    if value is not None and (value or default is None):
        if value and _may_be_secret(name, where, value):
            doc.secrets[value] = name
        return value
    if default is not None:
        return default
    doc.issues.append(ConfigIssue(rel, line, where, f"the environment variable {name} is not set",
                                  f"export {name}=... before running lake, or give a default: ${{{name}:-value}}"))
    return m.group(0)


# A variable or field named like a secret, or a value as long as a token: redacted wherever a
# message or a record would show it. Other values (a user name, a port, a short host name) are
# not: a database user `lake` from ${DB_USER} turned every word "lake" of every message into
# ${DB_USER}, commands included.
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|credential|auth|cert|private|signature|sas|session", re.IGNORECASE)
SECRET_MIN_LENGTH = 16


def _may_be_secret(name: str, where: str, value: str) -> bool:
    """Whether `${name}`'s value, put into field `where`, is kept out of messages and records."""
    return bool(_SECRET_NAME.search(name) or _SECRET_NAME.search(where)) or len(value) >= SECRET_MIN_LENGTH


# --- targets: -----------------------------------------------------------------------------------


def _entries(node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """Key -> (key node, value node); the last of duplicate keys wins, as when constructing."""
    yaml.SafeLoader("").flatten_mapping(node)  # `<<: *anchor` merge keys become plain entries
    return {str(k.value): (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _apply_target(root: yaml.MappingNode, rel: str, request: Request | None, doc: Document) -> tuple[yaml.MappingNode, str | None]:
    """The top-level mapping without `targets:`/`default_target:`, the chosen target merged over it."""
    top = _entries(root)
    rest = yaml.MappingNode(root.tag, [kv for kv in root.value if not (isinstance(kv[0], yaml.ScalarNode) and kv[0].value in ("targets", "default_target"))],
                            root.start_mark, root.end_mark, root.flow_style)
    declared = _declared(top.get("targets"), rel, doc)
    name, at = _chosen(top, rel, request, doc)
    if name is None or doc.issues:
        return rest, None
    if name not in declared:
        doc.issues.append(_unknown(rel, name, at, declared, top, request))
        return rest, None
    over = declared[name]
    return (_merge(rest, over) if isinstance(over, yaml.MappingNode) else rest), name  # type: ignore[return-value]


def _declared(entry: tuple[yaml.Node, yaml.Node] | None, rel: str, doc: Document) -> dict[str, yaml.Node]:
    """The declared targets by name, each checked against ALLOWED (issues into `doc`)."""
    if entry is None or _is_null(entry[1]):
        return {}
    key, node = entry
    if not isinstance(node, yaml.MappingNode):
        doc.issues.append(ConfigIssue(rel, node.start_mark.line + 1, "targets", "must be a mapping of target names to overrides",
                                      "e.g. targets: {dev: {warehouse: /data/dev}, prod: {warehouse: s3a://lake/prod}}"))
        return {}
    out: dict[str, yaml.Node] = {}
    for name, (_, body) in _entries(node).items():
        out[name] = body
        if _is_null(body):
            continue
        if not isinstance(body, yaml.MappingNode):
            doc.issues.append(ConfigIssue(rel, body.start_mark.line + 1, f"targets.{name}", "must be a mapping of the keys it overrides",
                                          f"e.g. {name}: {{warehouse: /data/{name}}}; a target may override {ALLOWED_TEXT}"))
            continue
        _check_allowed(body, ALLOWED, f"targets.{name}", rel, doc)
    return out


def _check_allowed(node: yaml.MappingNode, allowed: dict[str, dict[str, None] | None], at: str, rel: str, doc: Document) -> None:
    for key, (knode, vnode) in _entries(node).items():
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean `{close[0]}`? " if close else f"set `{key}` at the top level of lake.yaml; "
            doc.issues.append(ConfigIssue(rel, knode.start_mark.line + 1, f"{at}.{key}", "a target cannot override this key",
                                          f"{hint}a target may override only {ALLOWED_TEXT}"))
            continue
        sub = allowed[key]
        if sub is not None and isinstance(vnode, yaml.MappingNode):
            _check_allowed(vnode, sub, f"{at}.{key}", rel, doc)  # type: ignore[arg-type]


def _chosen(top: dict[str, tuple[yaml.Node, yaml.Node]], rel: str, request: Request | None, doc: Document) -> tuple[str | None, yaml.Node | None]:
    """The target's name and the node to blame if it is not declared: the request, else default_target."""
    if request is not None and "targets" not in top:
        # LAKE_TARGET may be meant for another project (or be the parent's, in `lake demo`'s own
        # project): a lake.yaml without targets has nothing to choose from. --target was meant here.
        if request.by != ENV_VAR:
            doc.issues.append(_no_targets(rel, request))
        return None, None
    if request is not None:
        return request.name, None
    default = top.get("default_target")
    if default is None or _is_null(default[1]):
        return None, None
    node = default[1]
    if not isinstance(node, yaml.ScalarNode):
        doc.issues.append(ConfigIssue(rel, node.start_mark.line + 1, "default_target", "must be a target's name",
                                      "e.g. default_target: dev (one of the names under `targets:`)"))
        return None, None
    _expand(node, rel, ("default_target",), doc, set())
    if "targets" not in top:
        doc.issues.append(ConfigIssue(rel, node.start_mark.line + 1, "default_target", f"names target {node.value!r} but lake.yaml declares no `targets:`",
                                      "declare it under `targets:` (docs/concepts/environments.md), or remove `default_target:`"))
        return None, None
    return str(node.value), node


def _no_targets(rel: str, request: Request) -> ConfigIssue:
    return ConfigIssue(rel, None, "targets", f"{request.by} asks for target {request.name!r} but lake.yaml declares no `targets:`",
                       f"declare it under `targets:` (docs/concepts/environments.md), or run without {request.by}")


def _unknown(rel: str, name: str, at: yaml.Node | None, declared: dict[str, yaml.Node],
             top: dict[str, tuple[yaml.Node, yaml.Node]], request: Request | None) -> ConfigIssue:
    """No target `name`: blame default_target's line, else the `targets:` key's."""
    field_, node = ("default_target", at) if at is not None else ("targets", top["targets"][0])
    by = f" (asked for by {request.by})" if request is not None else ""
    close = difflib.get_close_matches(name, list(declared), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return ConfigIssue(rel, node.start_mark.line + 1 if node is not None else None, field_, f"no target named {name!r}{by}",
                       f"{hint}declared targets: {', '.join(declared) or 'none'}")


def _merge(base: yaml.Node, over: yaml.Node) -> yaml.Node:
    """`over` deep-merged over `base`, as new mapping nodes (leaf nodes shared: lines stay true)."""
    if not (isinstance(base, yaml.MappingNode) and isinstance(over, yaml.MappingNode)):
        return over
    b, o = _entries(base), _entries(over)
    if "kind" in o and (b["kind"][1].value if "kind" in b else None) != o["kind"][1].value:
        return over  # another kind of source or catalog: the top level's keys would not fit it
    value = [(k, _merge(v, o[str(k.value)][1]) if str(k.value) in o else v) for k, v in b.values()]
    value += [o[key] for key in o if key not in b]
    return yaml.MappingNode(base.tag, value, base.start_mark, base.end_mark, base.flow_style)


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def inline_passwords(sources: Mapping[str, SourceDatabase], secrets: Mapping[str, str]) -> list[ConfigIssue]:
    """`reconcile.sources.*.password` of lake.yaml written into the file, not taken from `${VAR}`
    (`secrets`: the values `${VAR}` expanded)."""
    out = []
    for name, src in sources.items():
        if src.password and src.password not in secrets:
            var = f"{name.upper()}_DB_PASSWORD"
            out.append(ConfigIssue("lake.yaml", None, f"reconcile.sources.{name}.password", "a password written into the file",
                                   f"write `password: ${{{var}}}` and export {var}=... where lake runs"))
    return out
