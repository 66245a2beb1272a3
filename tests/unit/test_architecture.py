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


def test_no_import_cycles_between_framework_packages() -> None:
    """framework/ods, transform, quality, commands, demo: none reaches back to one that uses it."""
    g = _graph()
    packages = nx.DiGraph()
    for a, b in g.edges:
        pa, pb = a.split(".")[:2], b.split(".")[:2]
        if a.count(".") >= 2 and b.count(".") >= 2 and pa[0] == pb[0] == "framework" and pa != pb:
            packages.add_edge(".".join(pa), ".".join(pb))
    cycles = list(nx.simple_cycles(packages))
    assert not cycles, cycles[:5]


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
        if name.startswith("framework.demo") or name == "framework.cli":
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
