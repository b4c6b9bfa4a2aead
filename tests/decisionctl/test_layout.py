"""decisionctl's layout (issue 32), read from the source: packages by job, thin commands, one module of terminal
tables, and none of the adapter's serving modules pulled into the CLI. The cycle check and the 400-line limit
over the whole project are tests/adapter/test_import_graph.py's; this file reads the same graph."""

from __future__ import annotations

import ast

from tests.adapter.test_import_graph import GRAPH, MODULES

JOBS = {"evaluation", "certification", "traffic", "bulk", "load", "release", "review"}
SHARED = {"cli", "commands", "tables", "plots", "transport", "readback"}  # what several jobs and commands use
SERVING = {"engine", "runtime", "service", "app", "handlers", "serve", "admission", "answers", "bulk", "state_cache"}


def closure(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in GRAPH[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def test_decisionctl_is_packages_by_job() -> None:
    top = {m.split(".")[1] for m in MODULES if m.startswith("decisionctl.")}
    assert top == JOBS | SHARED
    for job in JOBS:
        assert MODULES[f"decisionctl.{job}"].read_text().startswith('"""')  # each package says what it holds
    names = [m.rsplit(".", 1)[-1] for m in MODULES if m.startswith("decisionctl.") and ".commands." not in m]
    assert sorted(set(names)) == sorted(names)  # one module per name: none shares a command's or another's


def test_no_module_but_tables_prints_a_table_and_no_command_computes_one() -> None:
    for module, path in MODULES.items():
        if module.startswith("decisionctl.") and module != "decisionctl.tables":
            defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            assert not any(name.startswith("render") or name == "table" for name in defined), module


def test_the_cli_does_not_import_the_adapters_serving_modules() -> None:
    pulled = set().union(*(closure(m) for m in MODULES if m.startswith("decisionctl.")))
    adapter = {m.split(".")[1] for m in pulled if m.startswith("decision_adapter.")}
    assert adapter & SERVING == set(), sorted(adapter & SERVING)
