"""The import graph of the adapter, decisionctl, the stacks and the client, read from the source (no import runs):
its modules, edges, cycles and floors, for tests/adapter/test_import_graph.py, tests/decisionctl/test_layout.py and
tests/stacks/test_supply_chain.py."""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# top-level package -> its folder; files are globbed, so a module moved between two runs is still found
PACKAGES = {
    "decision_spec": ROOT / "containers" / "decision_spec",
    "decision_adapter": ROOT / "containers" / "decision_adapter",
    "decisionctl": ROOT / "tools" / "decisionctl",
    "stacks": ROOT / "stacks",
    "decision_endpoints_client": ROOT / "clients" / "python" / "decision_endpoints_client",
}
LINE_LIMIT_FOLDERS = ("containers", "tools", "stacks", "clients", "benchmarks")
MAX_LINES = 400
# Reached: 9, serve -> app -> handlers -> service -> engine -> instruction_flags -> input_flags -> core.caller_text ->
# core.string_set (docs/architecture.md gives the history: 13 before issue 39, 17 before issue 32).
ADAPTER_FLOORS = 9


def module_files() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = module_files()


def imported(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The project modules an import statement loads: a submodule where one is named, else the package."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level:
        here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            found.add(f"{base}.{alias.name}")
        elif base in MODULES:
            found.add(base)
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        nodes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)]
        graph[module] = set().union(*(imported(module, n) for n in nodes)) - {module}
    return graph


GRAPH = import_graph()


def cycle() -> list[str] | None:
    """One import cycle, as the chain of modules that closes it; None when there is none."""
    state: dict[str, int] = {}  # 1: on the current chain, 2: done

    def walk(module: str, chain: list[str]) -> list[str] | None:
        state[module] = 1
        for dep in sorted(GRAPH[module]):
            if state.get(dep) == 1:
                return [*chain[chain.index(dep) :], dep] if dep in chain else [*chain, dep]
            if dep not in state and (found := walk(dep, [*chain, dep])):
                return found
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := walk(module, [module])):
            return found
    return None


def package_of(module: str) -> str:
    """The unit a package loop is counted between: a module's subpackage (decisionctl.core.scoring ->
    decisionctl.core, and a subpackage's __init__ is in it), or, for a module at the top of its package
    (decisionctl.plots, decision_adapter.engine), the module itself."""
    if MODULES[module].name == "__init__.py":
        return module
    package = module.rpartition(".")[0]
    return package if "." in package else module


def folder_of(module: str) -> str:
    """The folder a module's file sits in, as a package name (decisionctl.commands.cli -> decisionctl.commands,
    decision_adapter.engine -> decision_adapter): the unit a reader sees in the tree."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def package_cycle(unit: Callable[[str], str] = package_of) -> list[str] | None:
    """One loop between packages (a module of one importing a module of another, and back, maybe through others),
    as the chain of packages that closes it; None when there is none. `unit` says what a package is: package_of
    (a top-level module its own) or folder_of (the modules of a folder together)."""
    edges: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        here = unit(module)
        edges.setdefault(here, set()).update(p for d in deps if (p := unit(d)) != here)
    state: dict[str, int] = {}

    def walk(package: str, chain: list[str]) -> list[str] | None:
        state[package] = 1
        for dep in sorted(edges.get(package, ())):
            if state.get(dep) == 1:
                return [*chain[chain.index(dep) :], dep]
            if dep not in state and (found := walk(dep, [*chain, dep])):
                return found
        state[package] = 2
        return None

    for package in sorted(edges):
        if package not in state and (found := walk(package, [package])):
            return found
    return None


@cache
def floors(module: str) -> int:
    """Modules on the longest import chain from this one down, itself included (the root package, which holds
    only the version, does not count)."""
    below = GRAPH[module] - {"decision_adapter"}
    return 1 + max((floors(d) for d in below), default=0)


def type_names(modules: dict[str, Path] = MODULES) -> dict[str, list[str]]:
    """Each public class or type alias (a capitalised name bound at module level to a class, a union or a subscript)
    and the modules that define it."""
    found: dict[str, list[str]] = {}
    for module, path in modules.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                name = node.name
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(target := node.targets[0], ast.Name)
                and isinstance(node.value, ast.Subscript | ast.BinOp)
            ):
                name = target.id
            else:
                continue
            if name[0].isupper() and not name.isupper():
                found.setdefault(name, []).append(module)
    return found


# Lambda handlers the stacks bundle alone (their folder is the function's code): they cannot import the shared package.
STANDALONE = ("stacks.preflight_handler", "stacks.image_build_handler")


def constants(modules: dict[str, Path] = MODULES) -> dict[str, list[str]]:
    """Each public module-level constant (an upper-case name bound by assignment, not imported) and the modules that
    bind it; a module's own ROOT (its path), private names and the stand-alone Lambda handlers' are left out."""
    found: dict[str, list[str]] = {}
    for module, path in modules.items():
        if module.startswith(STANDALONE):
            continue
        for node in ast.parse(path.read_text()).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                name = target.id if isinstance(target, ast.Name) else ""
                if name.isupper() and len(name) > 1 and name != "ROOT" and not name.startswith("_"):
                    found.setdefault(name, []).append(module)
    return found


def copies_across_packages(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """The constants bound in more than one top-level package: a default or a name written twice."""
    return {name: modules for name, modules in found.items() if len({m.split(".")[0] for m in modules}) > 1}


def function_bodies(modules: dict[str, Path] = MODULES) -> dict[tuple[str, str], list[str]]:
    """Each public module-level function, keyed by its name and its body (docstring aside), and the modules that
    define it so; the stand-alone Lambda handlers' are left out."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, path in modules.items():
        if module.startswith(STANDALONE):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]  # the docstring
                found.setdefault((node.name, ast.dump(ast.Module(body=body, type_ignores=[]))), []).append(module)
    return found
