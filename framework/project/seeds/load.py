"""Reading one seed, `layers/seed/<name>.csv` and its optional `<name>.yaml`, into typed rows.

Everything wrong with a seed is a :class:`ConfigIssue` naming the file, the line, the column and
the fix: an unreadable or ragged CSV, a header name a table cannot have, a `columns:` or `key:`
entry the header lacks, a value its column's type does not take, a repeated key (or, without a
key, a repeated row), an empty key value. No Spark: the build turns the rows into a DataFrame
(framework/transform/seed.py).
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from framework.errors import ConfigIssue
from framework.project.config import load_model
from framework.project.seeds.values import BadValue, infer, normalize, typed
from models.config import _IDENT
from models.seed_config import SeedConfig

SEED_LAYER = "seed"
MAX_VALUE_ISSUES = 5  # per file: the first few bad values say what is wrong with the rest


@dataclass(frozen=True)
class SeedData:
    """A seed read and typed: its columns (name, Spark type), rows as the text Spark casts exactly
    (None: NULL), and the content hash that decides whether its table is rewritten."""

    name: str  # seed.<stem>
    csv: Path
    config: SeedConfig
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str | None, ...], ...]
    content_hash: str  # the CSV's bytes and what the YAML says of the data (types, key, delimiter)

    @property
    def rel(self) -> str:
        return f"layers/{SEED_LAYER}/{self.csv.name}"


def seed_files(root: Path) -> list[Path]:
    """The CSV files under `layers/seed/`, by name."""
    d = root / "layers" / SEED_LAYER
    return sorted(p for p in d.glob("*.csv") if not p.name.startswith(("_", "."))) if d.is_dir() else []


def read_seed(root: Path, path: Path) -> tuple[SeedData | None, list[ConfigIssue]]:
    """The seed of `path` (a CSV under layers/seed/), or None and every problem found."""
    rel = f"layers/{SEED_LAYER}/{path.name}"
    if not _IDENT.match(path.stem):
        return None, [ConfigIssue(rel, None, "(file)", f"{SEED_LAYER}.{path.stem} is not a name of letters, digits and underscores "
                                  "(not starting with a digit): it names the seed's table", "rename the file (and its .yaml)")]
    yaml_path = path.with_suffix(".yaml")
    cfg: SeedConfig | None = SeedConfig()
    issues: list[ConfigIssue] = []
    if yaml_path.exists():
        cfg, issues = load_model(yaml_path, SeedConfig, f"layers/{SEED_LAYER}/{yaml_path.name}")
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except OSError as e:
        return None, [*issues, ConfigIssue(rel, None, "(file)", f"cannot read: {e.strerror}", "check the file's permissions")]
    except UnicodeDecodeError as e:
        return None, [*issues, ConfigIssue(rel, None, "(file)", f"not UTF-8 text (byte {e.start})", "save the file as UTF-8")]
    if cfg is None:
        return None, issues
    return _typed(path, raw, text, cfg)


def _typed(path: Path, raw: bytes, text: str, cfg: SeedConfig) -> tuple[SeedData | None, list[ConfigIssue]]:
    rel, yrel = f"layers/{SEED_LAYER}/{path.name}", f"layers/{SEED_LAYER}/{path.stem}.yaml"
    lines = _numbered(text, cfg.delimiter)
    if not lines:
        return None, [ConfigIssue(rel, 1, "(header)", "the file is empty", "give it a header row of column names, e.g. code,name")]
    header_line, header = lines[0]
    names = [h.strip() for h in header]
    issues = _header_issues(rel, header_line, names) + _config_issues(yrel, names, cfg)
    body: list[tuple[int, list[str | None]]] = []
    for n, row in lines[1:]:
        if len(row) != len(names):
            issues.append(ConfigIssue(rel, n, "(row)", f"{len(row)} field(s), the header has {len(names)}",
                                      f"give the row one value per column ({', '.join(names)}); quote a value that holds {cfg.delimiter!r}"))
            continue
        body.append((n, [v if v != "" else None for v in row]))
    if issues:
        return None, issues
    columns, rows, issues = _columns(rel, yrel, names, body, cfg)
    issues += _key_issues(rel, yrel, names, body, rows, cfg)
    if issues:
        return None, issues
    data = json.dumps({"key": cfg.key, "delimiter": cfg.delimiter, "types": {c: normalize(s.type) for c, s in cfg.columns.items() if s.type}},
                      sort_keys=True)
    digest = hashlib.sha256(raw + b"\0" + data.encode()).hexdigest()[:16]
    return SeedData(f"{SEED_LAYER}.{path.stem}", path, cfg, columns, tuple(tuple(r) for r in rows), digest), []


def _numbered(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """The CSV's non-blank records with the line each starts on."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    out, start = [], 1
    for row in reader:
        if len(row) > 1 or any(v.strip() for v in row):  # a blank line is no row; `,,` is a row of NULLs
            out.append((start, row))
        start = reader.line_num + 1
    return out


def _header_issues(rel: str, line: int, names: list[str]) -> list[ConfigIssue]:
    out, seen = [], set()
    for i, n in enumerate(names, 1):
        if not _IDENT.match(n) or n.startswith("_"):
            fixed = "".join(c if c.isalnum() else "_" for c in n).strip("_") or f"column_{i}"
            out.append(ConfigIssue(rel, line, f"(header) column {i}", f"{n!r} is not a column name a table can have "
                                   "(letters, digits and underscores, not starting with a digit or _)", f"rename it, e.g. to {fixed}"))
        elif n.lower() in seen:
            out.append(ConfigIssue(rel, line, f"(header) column {i}", f"{n!r} appears twice (names are case-insensitive)", "rename one of them"))
        seen.add(n.lower())
    return out


def _unknown(yrel: str, where: str, name: str, names: Sequence[str], rel: str) -> ConfigIssue:
    close = difflib.get_close_matches(name, names, n=1)
    fix = f"did you mean {close[0]!r}? " if close else ""
    return ConfigIssue(yrel, None, where, f"{name!r} is not a column of {rel}", f"{fix}the header has: {', '.join(names)}")


def _config_issues(yrel: str, names: list[str], cfg: SeedConfig) -> list[ConfigIssue]:
    rel = yrel.removesuffix(".yaml") + ".csv"
    out = [_unknown(yrel, f"columns.{c}", c, names, rel) for c in cfg.columns if c not in names]
    return out + [_unknown(yrel, "key", k, names, rel) for k in cfg.key or () if k not in names]


def _columns(rel: str, yrel: str, names: list[str], body: list[tuple[int, list[str | None]]],
             cfg: SeedConfig) -> tuple[tuple[tuple[str, str], ...], list[list[str | None]], list[ConfigIssue]]:
    """Each column's type (declared, else inferred) and the rows' values as typed text."""
    types = []
    for i, n in enumerate(names):
        declared = cfg.columns[n].type if n in cfg.columns else None
        types.append(normalize(declared) if declared else infer([r[i] for _, r in body]))
    rows: list[list[str | None]] = []
    issues: list[ConfigIssue] = []
    for line, row in body:
        out: list[str | None] = []
        for i, v in enumerate(row):
            try:
                out.append(typed(v, types[i]))
            except BadValue as e:
                out.append(None)
                if len(issues) < MAX_VALUE_ISSUES:
                    how = f"declared {types[i]} in {yrel}" if names[i] in cfg.columns else f"typed {types[i]} from the other values"
                    issues.append(ConfigIssue(rel, line, names[i], f"{e.problem}; the column is {how}",
                                              f"write {e.example}, or declare the column's type in {yrel}, e.g. "
                                              f"`columns: {{{names[i]}: string}}`"))
        rows.append(out)
    return tuple(zip(names, types, strict=True)), rows, issues


def _key_issues(rel: str, yrel: str, names: list[str], body: list[tuple[int, list[str | None]]], rows: list[list[str | None]],
                cfg: SeedConfig) -> list[ConfigIssue]:
    """An empty key value; a key (without `key:`, a whole row) on two lines."""
    idx = [names.index(k) for k in cfg.key] if cfg.key else list(range(len(names)))
    seen: dict[tuple[str | None, ...], int] = {}
    out = []
    for (line, _), row in zip(body, rows, strict=True):
        k = tuple(row[i] for i in idx)
        if cfg.key and any(v is None for v in k):
            col = names[idx[[v is None for v in k].index(True)]]
            out.append(ConfigIssue(rel, line, col, f"the key column {col} is empty", f"give it a value (`key: [{', '.join(cfg.key)}]` in {yrel})"))
        elif k in seen:
            what = f"key ({', '.join(cfg.key)})" if cfg.key else "row (a seed without `key:` keeps one row per distinct row)"
            out.append(ConfigIssue(rel, line, ",".join(cfg.key or names), f"repeats the {what} of line {seen[k]}",
                                   f"remove one of the two lines, or set `key:` in {yrel} to columns that identify a row"))
        else:
            seen[k] = line
        if len(out) >= MAX_VALUE_ISSUES:
            break
    return out
