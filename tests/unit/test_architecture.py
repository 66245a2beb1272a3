"""The shape of the code, checked: no import cycles (between modules, or between the packages of
framework/), no module over 400 lines and no function over 60 (benchmarks excluded)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for top in ("framework", "models"):
        for p in sorted((REPO / top).rglob("*.py")):
            name = ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            out[name] = (p, ast.parse(p.read_text(encoding="utf-8")))
    return out


def _runtime_imports(tree: ast.Module, known: set[str]) -> set[str]:
    """Modules of this project imported when the module runs (not under `if TYPE_CHECKING:`)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
            found.update(subs or ([node.module] if node.module in known else []))
        for sub in ast.iter_child_nodes(node):
            visit(sub)

    visit(tree)
    return found


def _graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, (_p, tree) in mods.items():
        for dep in _runtime_imports(tree, set(mods)):
            if dep != name and not name.startswith(dep + "."):  # a package's own submodules
                g.add_edge(name, dep)
    return g


def test_no_import_cycles_between_modules() -> None:
    cycles = list(nx.simple_cycles(_graph()))
    assert not cycles, cycles[:5]


# framework/'s packages from the bottom up. A module may import its own package and the ones
# below it, never one above: at any depth (a function's lazy import counts) and under
# `if TYPE_CHECKING:` too. framework/ itself holds only errors.py and the package docstring.
LAYERS = (
    "models",  # pydantic types only
    "framework.errors",
    "framework.runtime",  # storage, locations, locks, leases, jars, run history, terminal output
    "framework.project",  # lake.yaml and the layers' YAML, targets, checks, SQL types
    "framework.table",  # the Hudi table: session, LakeTable, layouts, timeline, catalog
    "framework.quality",
    "framework.ods",
    "framework.reconcile",  # ODS against the source database (lake reconcile): canonical text, checksums, bisection, repair
    "framework.transform",
    "framework.envs",
    "framework.modeltest",
    "framework.site",
    "framework.observe",  # alerts, metrics, OpenLineage events: what the run records tell the outside world
    "framework.commands",
    "framework.ops",  # lake run, schedules, Airflow
    "framework.demo",  # test and demo infrastructure: only the CLI imports it
    "framework.engine",  # the warm engine: serves the CLI's commands (handed the CLI by framework/cli/engine_server.py)
    "framework.cli",
)


def _layer(module: str) -> int:
    for i, layer in reversed(list(enumerate(LAYERS))):
        if module == layer or module.startswith(layer + "."):
            return i
    if module == "framework":
        return 0  # `from framework import __version__`
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS in {Path(__file__).name}")


def _all_imports(tree: ast.Module, known: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every project module a module imports, anywhere in it."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
            out += [(node.lineno, m) for m in subs or ([node.module] if node.module in known else [])]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name in known]
    return out


def test_imports_only_go_down_the_layers() -> None:
    mods = _modules()
    bad = []
    for name, (_p, tree) in mods.items():
        mine = _layer(name)
        for line, dep in _all_imports(tree, set(mods)):
            if _layer(dep) > mine:
                bad.append(f"{name}:{line} imports {dep} ({LAYERS[_layer(dep)]} is above {LAYERS[mine]})")
    assert not bad, bad


def test_framework_root_is_a_map() -> None:
    """No loose modules: every module of framework/ is in a folder that says its role."""
    loose = sorted(p.name for p in (REPO / "framework").glob("*.py") if p.name not in ("__init__.py", "errors.py"))
    assert not loose, loose


def test_modules_and_functions_stay_small() -> None:
    big = []
    for name, (p, tree) in _modules().items():
        lines = len(p.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{name}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big.append(f"{name}.{node.name}: {n} lines")
    assert not big, big


# models/ holds pydantic types only; what they need beyond the standard library is pydantic.
MODELS_MAY_IMPORT = frozenset({"__future__", "pydantic", "pydantic_core", "models"})


def test_models_hold_only_types_importing_no_framework_or_heavy_libraries() -> None:
    """Every import in models/, at any depth and under `if TYPE_CHECKING:` too: behaviour that needs
    framework/, Great Expectations, Spark or the scheduler lives in framework/ (issue 17)."""
    import sys

    bad = []
    for name, (_p, tree) in _modules().items():
        if not name.startswith("models"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [node.module or ""] if node.level == 0 else []
            else:
                continue
            for t in targets:
                top = t.split(".")[0]
                if top not in MODELS_MAY_IMPORT and top not in sys.stdlib_module_names:
                    bad.append(f"{name}:{node.lineno} imports {t}")
    assert not bad, bad


def test_only_the_cli_imports_the_demo_package() -> None:
    """framework/demo/ (simulator, seed tables, Kafka broker, `lake demo`) is test and demo
    infrastructure: the core never imports it, at any depth; the CLI's `lake demo` and `lake init`
    (its sample CDC) are the one door (issue 17)."""
    bad = []
    for name, (_p, tree) in _modules().items():
        if name.startswith(("framework.demo", "framework.cli")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            if any(t == "framework.demo" or t.startswith("framework.demo.") for t in targets):
                bad.append(f"{name}:{node.lineno}")
    assert not bad, bad
