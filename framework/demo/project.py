"""The demo's own project: `out/demo/` (or `out/kafka-demo/`) under the project `lake demo` is
pointed at, set up from that project's declarations of the seed tables and the models built from
them. Every folder the demo creates carries a marker; `--fresh` empties only marked folders and
names what it removes, and a folder in the way without the marker stops the demo before anything
is deleted. The demo holds the same table locks as `lake run` while it writes."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from framework import demo as demo_data
from framework.errors import LakeError
from framework.ods.batch import resolve_source_path
from framework.project.config import Project
from models.config import FileSourceConfig, OdsTable

if TYPE_CHECKING:


    from models.records import LockHolder

DEMO_DIR = Path("out") / "demo"  # the demo's own project, under the project it is pointed at
KAFKA_DIR = Path("out") / "kafka-demo"
# Written into every directory lake creates for the demo; only directories carrying it are ever
# emptied or deleted, so a user's folder that happens to sit there is never touched.
MARKER = ".lake-demo"



# ------------------------------------------------------------------ the demo's own folders
@contextlib.contextmanager
def prepared(project: Project, console: Console, fresh: bool, lock_timeout: float) -> Iterator[Project]:
    """The demo's own project (see `demo_project`), its tables locked for the body of the `with`;
    with `fresh`, its CDC directory and warehouse emptied first, under those locks."""
    demo = demo_project(project, console, fresh)
    with _locked(demo, demo, console, lock_timeout):
        if fresh:
            _clear(_cdc_dir(demo), console)
            _clear(demo.warehouse.local, console)
        yield demo


def demo_project(project: Project, console: Console, fresh: bool) -> Project:
    """Set up `<project>/out/demo/` and load it: a `lake.yaml` with the project's spark, hudi,
    build and ods settings (warehouse `warehouse`, CDC from `cdc`), and in `layers/` the project's
    files declaring the seed tables plus the models built only from them. Nothing is written
    before every check has passed; nothing is deleted here but the demo's own `layers/` (--fresh)."""
    from framework.project.config import load_project

    seed = _declared_tables(project)
    files = _seed_files(project, seed)
    root = project.root / DEMO_DIR
    for path in (root, root / "layers", root / "cdc", root / "warehouse"):
        _refuse_foreign(path)
    _ours(root)
    if fresh or not (root / "layers").is_dir():
        _remove_ours(root / "layers", console)
        layers = _ours(root / "layers")
        for rel in files:
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(project.root / rel, dst)
        console.print(f"wrote {layers}: {len(files)} file(s) from {project.root / 'layers'}", markup=False, highlight=False)
    if fresh or not (root / "lake.yaml").is_file():
        _write_config(project, root / "lake.yaml")
    _ours(root / "cdc")
    _ours(root / "warehouse")
    demo = load_project(root)
    if (not demo.warehouse.is_local or demo.warehouse.local != (root / "warehouse").resolve()
            or _cdc_dir(demo).resolve() != (root / "cdc").resolve()):
        raise LakeError(f"{root / 'lake.yaml'} points `warehouse:` or `ods.source` outside {root}; the demo writes only inside its own folder",
                        fix="rerun with --fresh, which rewrites that lake.yaml")
    return demo


def _seed_files(project: Project, seed: dict[str, OdsTable]) -> list[Path]:
    """Project-relative files to copy: the YAML files declaring the seed tables, and each model
    (with its YAML) whose upstreams are seed tables or such models."""
    from framework.transform.loader import load_models

    tables = [seed[s] for s in demo_data.SOURCES]
    files = sorted({Path(project.ods_files[t.table_name]) for t in tables})
    models = load_models(project)
    have = {t.qualified_name for t in tables}
    chosen: list[str] = []
    grew = True
    while grew:
        ready = sorted(n for n, m in models.items() if n not in have and set(m.upstreams) <= have)
        have |= set(ready)
        chosen += ready
        grew = bool(ready)
    for name in chosen:
        m = models[name]
        files += [p.relative_to(project.root) for p in (m.path, m.config_path) if p is not None]
    return files


def _write_config(project: Project, path: Path) -> None:
    """The demo's lake.yaml: the project's settings as its lake.yaml writes them, `${VAR}`
    references kept (their values may be secrets, and this file is no place for them)."""
    import yaml

    from framework.project.config import unexpanded

    raw = unexpanded(project)
    ods = raw.get("ods")
    ods = ods if isinstance(ods, dict) else {}
    data = {
        "name": "demo",
        "warehouse": "warehouse",
        **{k: raw[k] for k in ("spark", "hudi", "build") if raw.get(k) is not None},
        "ods": {**{k: v for k, v in ods.items() if k != "source"}, "source": {"kind": "files", "path": "cdc", "format": "debezium-json"}},
    }
    head = (f"# Written by `lake demo` from the spark, hudi, build and ods settings of {project.root / 'lake.yaml'};\n"
            "# the demo's warehouse and CDC stay in this folder. `lake demo --fresh` rewrites this file.\n")
    path.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _refuse_foreign(path: Path) -> None:
    """Stop unless `path` is absent, an empty directory, or a directory the demo created (marked)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise LakeError(f"{path} is in the way of the demo and was not created by it (a {'link' if path.is_symlink() else 'file'})",
                        fix=f"move {path} away, then rerun `lake demo`")
    if path.is_dir() and not (path / MARKER).is_file() and any(path.iterdir()):
        raise LakeError(f"{path} exists and was not created by `lake demo` (it has no {MARKER} marker); "
                        "the demo never writes into or deletes what it did not create",
                        fix=f"move {path} away (or remove it yourself), then rerun `lake demo`")


def _ours(path: Path) -> Path:
    """Create (or adopt an empty) directory for the demo and mark it as the demo's."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    if not marker.is_file():
        marker.write_text("Created by `lake demo`; `lake demo --fresh` may delete what is in this directory.\n", encoding="utf-8")
    return path


def _remove_ours(path: Path, console: Console) -> None:
    """Delete a directory the demo created (it carries the marker), saying so; anything else stays."""
    if path.is_dir() and not path.is_symlink() and (path / MARKER).is_file():
        shutil.rmtree(path)
        console.print(f"removed {path}/", markup=False, highlight=False)


def _clear(path: Path, console: Console) -> None:
    """Empty a directory the demo created, except its marker and the lock files (`_lake/locks`,
    held by this run), naming each removed path."""
    if not (path.is_dir() and (path / MARKER).is_file()):
        return
    for entry in sorted(path.iterdir()):
        if entry.name == MARKER:
            continue
        if entry.name == "_lake" and entry.is_dir() and not entry.is_symlink():
            for sub in sorted(entry.iterdir()):
                if sub.name != "locks":
                    _delete(sub, console)
            continue
        _delete(entry, console)


def _delete(entry: Path, console: Console) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
        console.print(f"removed {entry}/", markup=False, highlight=False)
    else:
        entry.unlink()
        console.print(f"removed {entry}", markup=False, highlight=False)


@contextlib.contextmanager
def _locked(tables_of: Project, writes_to: Project, console: Console, timeout: float) -> Iterator[None]:
    """Hold the locks `lake run` takes (ingest checkpoint, every ODS table and model of
    `tables_of`) in the warehouse of `writes_to`, for the whole demo."""
    from framework.ods.ingest import checkpoint_name
    from framework.runtime.lock import hold, ingest_lock, table_lock
    from framework.runtime.paths import Layout
    from framework.transform.loader import load_models

    names = [ingest_lock(checkpoint_name(None)), *(table_lock(t.qualified_name) for t in tables_of.ods_tables),
             *(table_lock(n) for n in load_models(tables_of))]

    def stale(name: str, h: LockHolder) -> None:
        console.print(f"note: lock {name} was left by pid {h.pid} on {h.host} (`{h.command}`), which exited without releasing it; taken over",
                      markup=False, highlight=False)

    with hold(Layout(writes_to.warehouse).locks, names, command=shlex.join(["lake", *sys.argv[1:]]), timeout=timeout, on_stale=stale):
        yield




def _declared_tables(project: Project) -> dict[str, OdsTable]:
    """The ODS declaration of each seed source table; the demo cannot run without all six."""
    by_source = {t.source: t for t in project.ods_tables}
    missing = [s for s in demo_data.SOURCES if s not in by_source]
    if missing:
        raise LakeError(
            f"the demo writes CDC for {', '.join(missing)}, which {project.root}/layers/ods/ does not declare",
            fix="run it in the lake repository (lake --project <repo> demo), or copy its layers/ods/test_db.yaml and salesdb.yaml",
        )
    return by_source


def _cdc_dir(project: Project) -> Path:
    src = project.config.ods.source
    if not isinstance(src, FileSourceConfig):
        raise LakeError(
            f"the demo writes CDC files, but ods.source.kind is {src.kind!r}",
            fix="run the demo in a project whose lake.yaml has `ods: {source: {kind: files, path: cdc}}`",
        )
    where = resolve_source_path(project, src.path)
    if not where.is_local:
        raise LakeError(f"the demo writes CDC files on this machine, not to {where}",
                        fix="rerun with --fresh, which rewrites the demo's lake.yaml")
    return where.local


