"""The import graph, read from the source (no import runs): no cycle among the adapter, decisionctl, the stacks
and the client, between modules, packages or folders; the adapter's floors (modules on its longest import chain) and
its error module at the bottom; decisionctl apart from the stacks; no module over 400 lines."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.import_graph_support import (
    ADAPTER_FLOORS,
    GRAPH,
    LINE_LIMIT_FOLDERS,
    MAX_LINES,
    MODULES,
    ROOT,
    constants,
    copies_across_packages,
    cycle,
    floors,
    folder_of,
    function_bodies,
    package_cycle,
    type_names,
)


def test_no_import_cycle() -> None:
    assert len(GRAPH) > 100  # the four packages were found
    assert cycle() is None


def test_no_package_loop() -> None:
    """No package imports another that imports it back: a constant both need goes in a leaf module."""
    assert package_cycle() is None


def test_no_folder_imports_another_that_imports_it_back() -> None:
    """Counted by folder, the unit a reader sees: a folder's modules import no folder whose modules import it back.
    The adapter's ground floor (contract, models, question types, errors, settings) is its own folder, core/, below
    prompting/ and the serving modules; decisionctl's entry point is in commands/, above the shared modules at the
    package's top (before issue 47: decision_adapter <-> prompting, decisionctl <-> commands and <-> evaluation)."""
    assert package_cycle(folder_of) is None


def test_a_folder_loop_is_seen() -> None:
    """The check above can fail: a module at decisionctl's top importing a command makes that loop again."""
    GRAPH["decisionctl.tables"].add("decisionctl.commands.options")
    try:
        found = package_cycle(folder_of)
    finally:
        GRAPH["decisionctl.tables"].discard("decisionctl.commands.options")
    assert found is not None and {"decisionctl", "decisionctl.commands"} <= set(found)


def test_decisionctl_imports_no_stacks_module() -> None:
    """The CLI reads the evaluation record's format from a module of its own, so its wheel needs none of stacks/."""
    reached = {d for m, deps in GRAPH.items() if m.split(".")[0] == "decisionctl" for d in deps}
    assert sorted(d for d in reached if d.split(".")[0] == "stacks") == []


def test_the_adapter_is_at_most_its_floors_deep() -> None:
    adapter = [m for m in GRAPH if m.startswith("decision_adapter.")]
    deepest = max(adapter, key=floors)
    assert floors(deepest) <= ADAPTER_FLOORS, f"{deepest} is {floors(deepest)} floors deep"


def test_the_error_module_imports_nothing_of_the_adapters() -> None:
    """Every module may raise a domain error, so errors.py must sit on the bottom floor."""
    assert GRAPH["decision_adapter.core.errors"] == set()
    assert floors("decision_adapter.core.errors") == 1


def test_a_cycle_is_seen() -> None:
    """The checks above can fail: a cycle added to the graph is found."""
    GRAPH["decision_adapter.core.signals"].add("decision_adapter.serve")
    try:
        found = cycle()
    finally:
        GRAPH["decision_adapter.core.signals"].discard("decision_adapter.serve")
    assert found is not None and found[0] == found[-1]


def test_a_package_loop_is_seen() -> None:
    """A module of one package importing a module that imports the package is a loop."""
    GRAPH["decision_adapter.prompting.sandbox"].add("decision_adapter.loading")  # loading loads the prompt schemes
    try:
        found = package_cycle()
    finally:
        GRAPH["decision_adapter.prompting.sandbox"].discard("decision_adapter.loading")
    assert found is not None and found[0] == found[-1]


def test_no_module_over_400_lines() -> None:
    over = {
        str(path.relative_to(ROOT)): n
        for folder in LINE_LIMIT_FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if "node_modules" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert over == {}


def test_no_test_module_imports_another() -> None:
    """Tests share helpers through tests/ helper modules (tests/*_support.py, conftest.py), never by importing a test
    module: its fixtures and tests would be collected twice, and a change to one test would move another."""
    importers = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_"):
                    importers[str(path.relative_to(ROOT))] = name
    assert len(list((ROOT / "tests").rglob("test_*.py"))) > 80  # the test modules were found
    assert importers == {}


def test_each_public_type_has_one_name_across_the_packages() -> None:
    """One name, one meaning, across the adapter, decisionctl, the stacks and the client: the client's HTTP reply is
    `EndpointResponse` (the adapter's `schemas.Answer` is a decision's answer), decide's printout `DecideOutput` (the
    adapter's `Decided` is a mini-batch's decision), the load test's `SendResult` (joins' `Outcome` is an outcome
    row), cost's `CostedSection`; a type both sides need (`RecordId`) is defined once, in the contract."""
    names = type_names()
    assert len(names) > 200  # the packages' types were read
    assert {name: modules for name, modules in names.items() if len(modules) > 1} == {}


def test_a_name_defined_twice_is_seen(tmp_path: Path) -> None:
    """The check above can fail: two modules defining `Answer` (a class and an alias) are found."""
    (tmp_path / "a.py").write_text("class Answer:\n    status: int\n")
    (tmp_path / "b.py").write_text("Answer = int | str\nMAX = 3\n")
    assert type_names({"a": tmp_path / "a.py", "b": tmp_path / "b.py"}) == {"Answer": ["a", "b"]}


def test_the_shared_package_is_pure_and_imports_none_of_the_three() -> None:
    """decision_spec holds what the adapter, the stacks and decisionctl all know: it imports the standard library,
    pydantic and itself, nothing of theirs (and no numpy, FastAPI or CDK), so each of the three can import it."""
    allowed = set(sys.stdlib_module_names) | {"pydantic", "decision_spec", "__future__"}
    spec = [m for m in MODULES if m.split(".")[0] == "decision_spec"]
    assert len(spec) >= 12
    imported = {m: sorted(_top_imports(MODULES[m]) - allowed) for m in spec}
    assert {m: names for m, names in imported.items() if names} == {}


def test_the_stacks_import_only_the_shared_package_of_the_project() -> None:
    """Synth reads what it shares with the adapter and decisionctl from decision_spec (before issue 47 it imported
    four decisionctl modules, and kept its own copies of the adapter's names)."""
    reached = {d.split(".")[0] for m, deps in GRAPH.items() if m.split(".")[0] == "stacks" for d in deps}
    assert reached - {"stacks"} == {"decision_spec"}


def test_no_constant_is_written_in_two_packages() -> None:
    """A name or default the adapter, the stacks and decisionctl share is bound once, in decision_spec; a copy in
    another package (the stacks' event field names, answer shapes, log-group prefixes, manifest name, JSON Lines
    type, answer-setting prefix before issue 47) fails here."""
    assert copies_across_packages(constants()) == {}
    within = {name: ms for name, ms in constants().items() if name.startswith("EXIT_") and len(ms) > 1}
    assert within == {}  # decisionctl's exit statuses: once, in exit_codes (five modules bound EXIT_FAILED before)


def test_no_function_is_written_in_two_packages() -> None:
    """A function the adapter, the stacks and decisionctl all need is defined once, in decision_spec: one of the same
    name and body in two packages is a copy (decisionctl's and the stacks' component_name, the stacks' endpoint and
    stack names written again by decisionctl, before issue 47)."""
    copies = {name: ms for (name, _), ms in function_bodies().items() if len({m.split(".")[0] for m in ms}) > 1}
    assert copies == {}


def test_a_copied_function_is_seen(tmp_path: Path) -> None:
    """The check above can fail: the same naming function in the stacks and decisionctl, docstrings apart, is found."""
    (tmp_path / "a.py").write_text('def component_name(env, section):\n    return f"decision-{env}-{section}-model"\n')
    (tmp_path / "b.py").write_text(
        'def component_name(env, section):\n    """Named as the stacks name it."""\n'
        '    return f"decision-{env}-{section}-model"\n\ndef other():\n    return 1\n'
    )
    found = function_bodies({"stacks.hosting": tmp_path / "a.py", "decisionctl.names": tmp_path / "b.py"})
    assert [ms for (name, _), ms in found.items() if name == "component_name"] == [
        ["stacks.hosting", "decisionctl.names"]
    ]


def test_a_copied_constant_is_seen(tmp_path: Path) -> None:
    """The check above can fail: the stacks binding the adapter's event name again is found."""
    (tmp_path / "a.py").write_text('DECISION = "decision"\n')
    (tmp_path / "b.py").write_text('DECISION = "decision"\nROOT = 1\n')
    found = constants({"decision_spec.events": tmp_path / "a.py", "stacks.observability": tmp_path / "b.py"})
    assert copies_across_packages(found) == {"DECISION": ["decision_spec.events", "stacks.observability"]}


def test_the_image_ships_every_package_the_adapter_imports() -> None:
    """The Dockerfile copies each of the project's packages the adapter reaches (a stand-in for building the image,
    which needs a Docker engine): the shared package beside the adapter."""
    reached, todo = set(), ["decision_adapter.serve"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(GRAPH[module])
    packages = {m.split(".")[0] for m in reached}
    dockerfile = (ROOT / "containers" / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) /opt/decision/\1$", dockerfile, re.M))
    assert packages == {"decision_adapter", "decision_spec"} and packages <= copied


def _top_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_adapters_ground_floor_imports_no_web_framework() -> None:
    """core/ defines the errors and the models; they are rendered at the HTTP edge (error_bodies.py renders an
    error once per dialect), so no core module imports FastAPI, Starlette or uvicorn (core/errors.py imported FastAPI's
    JSONResponse and built OpenAI's envelope before issue 47)."""
    web = {"fastapi", "starlette", "uvicorn"}
    core = [m for m in MODULES if m.startswith("decision_adapter.core.")]
    assert len(core) >= 5
    assert {m: sorted(_top_imports(MODULES[m]) & web) for m in core if _top_imports(MODULES[m]) & web} == {}


THREE = ("decision_adapter", "decisionctl", "stacks")


def crossings() -> set[tuple[str, str]]:
    """(importer, imported) among the adapter, decisionctl and the stacks: an import of one by another."""
    return {
        (here, there)
        for m, deps in GRAPH.items()
        for d in deps
        if (here := m.split(".")[0]) in THREE and (there := d.split(".")[0]) in THREE and here != there
    }


def test_the_adapter_the_stacks_and_decisionctl_import_one_another_only_through_the_shared_package() -> None:
    """Each of the three imports decision_spec and nothing of the other two. Before issue 47 decisionctl imported ten
    adapter modules (95 import statements, the manifest, policy, schemas and question types among them) and the stacks
    four decisionctl modules (19); the last, the yes/no intercept's arithmetic (core/signals.shift_log_odds, which
    decisionctl fitted by), is the contract's now, in floats, and the engine applies the same function."""
    assert crossings() == set()


def test_a_crossing_is_seen() -> None:
    """The check above can fail: decisionctl importing the adapter's signals again is found."""
    GRAPH["decisionctl.exit_codes"].add("decision_adapter.core.signals")
    try:
        assert crossings() == {("decisionctl", "decision_adapter")}
    finally:
        GRAPH["decisionctl.exit_codes"].discard("decision_adapter.core.signals")
