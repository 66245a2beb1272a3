"""Discover and parse the models under `layers/dwd/` and `layers/dws/`, and the seeds of
`layers/seed/` (framework/transform/seed.py), which build like models without upstreams.

A model is `<layer>/<stem>.sql` (one Spark SQL SELECT naming its upstream tables directly) or
`<layer>/<stem>.py` (one function taking a context and returning a DataFrame), with an optional
sidecar `<stem>.yaml`. Its name is `<layer>.<stem>`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlglot
from sqlglot import exp

from framework.errors import ConfigError, ConfigIssue
from framework.project.config import Project, load_model
from framework.project.seeds.load import SeedData, read_seed, seed_files
from framework.transform import fingerprint as fp
from framework.transform.analysis import strategy_issues
from models.config import _IDENT, ModelConfig

MODEL_LAYERS = ("dwd", "dws")


@dataclass(frozen=True)
class Model:
    name: str
    layer: str
    stem: str
    kind: Literal["sql", "python", "seed"]
    path: Path
    config: ModelConfig
    sql: str | None
    upstreams: tuple[str, ...]
    fingerprint: str  # the data hash: a change rebuilds the table (framework/transform/fingerprint.py)
    config_path: Path | None = None
    metadata_fingerprint: str = ""  # description, tags, checks, ...: never a rebuild
    legacy_fingerprint: str = ""  # what lake recorded before the data/metadata split
    seed: SeedData | None = None  # a seed's typed rows (kind "seed")

    @property
    def rel(self) -> str:
        return f"layers/{self.layer}/{self.path.name}"

    @property
    def history_name(self) -> str | None:
        """`<layer>.<name>_history` when the model keeps its history (`history: true`), else None."""
        return f"{self.name}_history" if self.kind != "seed" and self.config.history else None

    @property
    def shape(self) -> str | None:
        """The query's shape for forward-only changes (fingerprint.shape); None for Python models and seeds."""
        return fp.shape(self.sql, self.config) if self.kind == "sql" and self.sql else None

    def same_data(self, recorded: str | None) -> bool:
        """Whether a table whose last commit records `recorded` holds this model's data: its data
        hash, or the single fingerprint of an older lake for the same query and YAML."""
        return recorded is not None and recorded in (self.fingerprint, self.legacy_fingerprint)


def sql_tables(sql: str) -> list[str]:
    """Qualified upstream tables a SELECT reads (CTE names excluded), in order of appearance."""
    tree = sqlglot.parse_one(sql, read="spark")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: list[str] = []
    for t in tree.find_all(exp.Table):
        if not t.db and t.name.lower() in ctes:
            continue
        name = f"{t.db}.{t.name}".lower() if t.db else t.name.lower()
        if name not in out:
            out.append(name)
    return out


def load_models(project: Project) -> dict[str, Model]:
    """All models of the project, validated; one ConfigError lists every problem."""
    issues: list[ConfigIssue] = []
    found: dict[str, Model] = {}
    for layer in MODEL_LAYERS:
        d = project.root / "layers" / layer
        if not d.is_dir():
            continue
        stems: dict[str, list[Path]] = {}
        for p in sorted(d.iterdir()):
            if p.suffix in (".sql", ".py") and not p.name.startswith(("_", ".")):
                stems.setdefault(p.stem, []).append(p)
        for stem, paths in stems.items():
            model = _load_one(layer, stem, paths, issues)
            if model is not None:
                found[model.name] = model
    seeds, seed_issues = load_seeds(project)
    issues += seed_issues
    found.update(seeds)
    histories = {m.history_name: m for m in found.values() if m.history_name}
    for name, m in histories.items():
        if name in found:
            issues.append(ConfigIssue(m.rel, None, "history", f"{name}, the history of {m.name}, is also a model ({found[name].rel})",
                                      f"rename one of them, or set `history: false` in {m.stem}.yaml"))
    known = {n for t in project.ods_tables for n in t.readable()} | set(project.externals) | set(found) | set(histories)
    for m in found.values():
        for u in m.upstreams:
            if u not in known:
                hint = difflib.get_close_matches(u, sorted(known), n=1)
                issues.append(ConfigIssue(m.rel, None, "upstream", f"unknown table {u}", f"did you mean {hint[0]}?" if hint else f"known tables: {', '.join(sorted(known))}"))
            if u == m.name:
                issues.append(ConfigIssue(m.rel, None, "upstream", f"{m.name} reads itself", "a model cannot read its own output"))
    if not issues:
        issues += strategy_issues(project, found)
    if issues:
        raise ConfigError(issues)
    return found


def load_seeds(project: Project) -> tuple[dict[str, Model], list[ConfigIssue]]:
    """Every seed of `layers/seed/` as a model without upstreams (framework/transform/seed.py);
    the problems of the others."""
    out: dict[str, Model] = {}
    issues: list[ConfigIssue] = []
    for path in seed_files(project.root):
        data, found = read_seed(project.root, path)
        issues += found
        if data is None:
            continue
        c = data.config
        cfg = ModelConfig(key=c.key, tags=c.tags, description=c.description, owner=c.owner, checks=c.checks,
                          columns={n: col.description for n, col in c.columns.items() if col.description})
        yaml_path = path.with_suffix(".yaml")
        out[data.name] = Model(data.name, "seed", path.stem, "seed", path, cfg, None, (), data.content_hash,
                               yaml_path if yaml_path.exists() else None, fp.metadata(cfg), seed=data)
    return out, issues


def _load_one(layer: str, stem: str, paths: list[Path], issues: list[ConfigIssue]) -> Model | None:
    """The model `<layer>.<stem>` from its file (and YAML), or None with its problems in `issues`."""
    rel = f"layers/{layer}/"
    if len(paths) > 1:
        issues.append(ConfigIssue(rel + paths[0].name, None, "(file)", f"both {', '.join(p.name for p in paths)} define {layer}.{stem}", "keep one of them"))
        return None
    path = paths[0]
    if not _IDENT.match(stem):
        fixed = re.sub(r"[^A-Za-z0-9_]", "_", stem)
        fixed = "m_" + fixed if fixed[:1].isdigit() else fixed
        issues.append(ConfigIssue(rel + path.name, None, "(file)", f"{layer}.{stem} is not a name of letters, digits and underscores (not starting with a digit): it names the model's folder and SQL table", f"rename the file (and its .yaml), e.g. to {fixed}{path.suffix}"))
        return None
    cfg_path = path.with_suffix(".yaml")
    cfg: ModelConfig | None = ModelConfig()
    if cfg_path.exists():
        cfg, errs = load_model(cfg_path, ModelConfig, rel + cfg_path.name)
        issues += errs
    if cfg is None:
        return None
    text = path.read_text(encoding="utf-8")
    sidecar = cfg_path if cfg_path.exists() else None
    # Only what the model computes counts for a rebuild; description, tags, checks and comments
    # do not (framework/transform/fingerprint.py).
    meta, legacy = fp.metadata(cfg), fp.legacy(text, cfg)
    if path.suffix == ".py":
        if not cfg.depends_on:
            issues.append(ConfigIssue(rel + cfg_path.name, None, "depends_on", f"the Python model {layer}.{stem} declares no upstream tables", f"add `depends_on: [ods.some_table]` to {rel}{cfg_path.name}"))
            return None
        return Model(f"{layer}.{stem}", layer, stem, "python", path, cfg, None, tuple(u.lower() for u in cfg.depends_on),
                     fp.data("python", text, cfg), sidecar, meta, legacy)
    try:
        ups = sql_tables(text)
    except sqlglot.errors.ParseError as e:
        err = e.errors[0] if e.errors else {}
        issues.append(ConfigIssue(rel + path.name, err.get("line"), "(sql)", f"not valid Spark SQL: {err.get('description', str(e))}", "fix the SELECT (lake parses it with sqlglot's Spark dialect)"))
        return None
    unqualified = [u for u in ups if "." not in u]
    if unqualified:
        issues.append(ConfigIssue(rel + path.name, None, "(sql)", f"table {unqualified[0]!r} has no layer", f"name it with its layer, e.g. ods.{unqualified[0]}"))
        return None
    return Model(f"{layer}.{stem}", layer, stem, "sql", path, cfg, text.strip().rstrip(";"), tuple(ups), fp.data("sql", text, cfg), sidecar, meta, legacy)
