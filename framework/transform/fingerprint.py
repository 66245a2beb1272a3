"""Model fingerprints: a data hash (what the model computes) and a metadata hash (the rest).

As in SQLMesh, only the data hash decides whether a model's table must be rebuilt: its query
(SQL without comments, whitespace or keyword case; Python source without comments or blank
lines) and the settings that change its rows or their layout (DATA_FIELDS). Descriptions,
tags, checks and any other YAML key go into the metadata hash, which `state:modified` selectors
compare but builds never act on.

Tables built before the split record the old single fingerprint (query text and YAML, checks
left out): `legacy` recomputes it, so an unchanged model is not rebuilt on upgrade.
"""

from __future__ import annotations

import hashlib
import io
import json
import tokenize
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from models.config import ModelConfig

# ModelConfig keys that change what a model's table holds (rows, key, partitions, hidden state).
DATA_FIELDS = ("key", "partition_by", "strategy", "depends_on", "type")
# Neither hash: how a build runs, not what it writes (build.recompute_below_mib per model).
BUILD_FIELDS = ("recompute_below_mib", "compact_every", "incremental", "history")
# The index: in the data hash as `TableLayout.layout_tag`, and only when it is not the default, so
# models built before these settings existed keep their hash (a new index needs a new table).
LAYOUT_FIELDS = ("index", "buckets")
# The metadata hash takes every other key; these are the known ones. tests/unit/test_fingerprint.py
# fails on a key in none of the three, so a new setting is classified when it is added.
METADATA_FIELDS = ("tags", "description", "checks", "owner", "columns", "tests", "contract", "column_contracts")
# Metadata keys added after tables recorded metadata hashes: hashed only when set, so a model that
# does not use them keeps the hash its table records (no `state:modified`, no commit to record it).
_HASHED_WHEN_SET = ("contract", "column_contracts")
# The keys the single fingerprint of lake before the split hashed (checks always as []).
_LEGACY_FIELDS = ("key", "partition_by", "strategy", "depends_on", "tags", "description", "checks")
_VERBATIM = (TokenType.VAR, TokenType.IDENTIFIER)  # names: their case names the output columns


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def sql_text(sql: str) -> str:
    """The query as the data hash sees it: its tokens (keywords upper case, names and literals
    as written), without comments, whitespace or trailing semicolons."""
    tokens = Spark().tokenize(sql)
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    out = []
    for t in tokens:
        verbatim = t.token_type in _VERBATIM or "STRING" in t.token_type.name
        out.append(f"{t.token_type.name}:{t.text if verbatim else ' '.join(t.text.upper().split())}")
    return "\n".join(out)


def python_text(source: str) -> str:
    """A Python model's source as the data hash sees it: its tokens without comments and blank
    lines (indentation kept as INDENT/DEDENT); the source itself when it does not tokenize."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    blank = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENDMARKER}
    return "\n".join(f"{tokenize.tok_name[t.type]}:{'' if t.type in blank else t.string}" for t in toks if t.type not in skip)


def _dump(cfg: ModelConfig, fields: tuple[str, ...] | None, leave_out: tuple[str, ...] = ()) -> str:
    d: dict[str, Any] = cfg.model_dump(mode="json")
    unset = {k for k in _HASHED_WHEN_SET if d.get(k) in (None, {}, [])}
    keep = fields if fields is not None else tuple(k for k in d if k not in leave_out and k not in unset)
    return json.dumps({k: d[k] for k in keep}, sort_keys=True)


def data(kind: str, text: str, cfg: ModelConfig) -> str:
    """The data hash of a model (`kind` sql or python, `text` its file)."""
    body = sql_text(text) if kind == "sql" else python_text(text)
    layout = [cfg.layout_tag] if cfg.index != "simple" else []
    return digest(body, _dump(cfg, DATA_FIELDS), *layout)


def metadata(cfg: ModelConfig) -> str:
    """The metadata hash: every YAML key that is neither data nor a build setting."""
    return digest(_dump(cfg, None, DATA_FIELDS + BUILD_FIELDS + LAYOUT_FIELDS))


def legacy(text: str, cfg: ModelConfig) -> str:
    """The fingerprint lake recorded before the split: the file's text and the YAML (checks as [])."""
    d = cfg.model_copy(update={"checks": []}).model_dump(mode="json")
    return digest(text, json.dumps({k: d[k] for k in _LEGACY_FIELDS}, sort_keys=True))


def shape(sql: str, cfg: ModelConfig) -> str | None:
    """What a forward-only change compares (`lake build --forward-only`): a hash of each output
    column's expression, of the query without its SELECT list (FROM, joins, WHERE, GROUP BY, ...)
    and of the data settings, as JSON; None for a query whose output columns cannot be named one
    by one (`*`, a UNION, a column named twice, SQL sqlglot does not parse)."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    columns: dict[str, str] = {}
    for e in tree.expressions:
        name = e.alias_or_name
        if isinstance(e, exp.Star) or isinstance(e, exp.Column) and isinstance(e.this, exp.Star) or not name or name in columns:
            return None
        columns[name] = digest(e.unalias().sql(dialect="spark", comments=False))
    body = tree.copy()
    body.set("expressions", [exp.Star()])
    return json.dumps({"columns": columns, "body": digest(body.sql(dialect="spark", comments=False)),
                       "settings": digest(_dump(cfg, DATA_FIELDS))}, sort_keys=True)


def added_columns(recorded: str | None, now: str | None) -> list[str] | None:
    """The output columns `now` adds to the query `recorded` describes when that is all that
    changed (every other column's expression, the rest of the query and the data settings the
    same); None otherwise, or when either shape is unknown."""
    if recorded is None or now is None:
        return None
    try:
        old, new = json.loads(recorded), json.loads(now)
    except json.JSONDecodeError:
        return None
    if old.get("body") != new.get("body") or old.get("settings") != new.get("settings"):
        return None
    was, cols = old.get("columns") or {}, new.get("columns") or {}
    if any(cols.get(c) != h for c, h in was.items()):
        return None
    added = [c for c in cols if c not in was]
    return added or None
