"""decisionctl's layout (issues 32, 39 and 47), read from the source: packages by job side by side over a shared core
(no job imports another), none importing a stack, commands that are a page of arguments around one use case and
at most CLI_FLOORS modules deep, one module of terminal tables, and none of the adapter's serving modules pulled
into the CLI. The module-level cycle check and the 400-line limit over the whole project are
tests/adapter/test_import_graph.py's; this file reads the same graph (tests/import_graph_support.py)."""

from __future__ import annotations

import ast
from functools import cache

from tests.import_graph_support import GRAPH, MODULES, floors

JOBS = {"evaluation", "certification", "traffic", "bulk", "load", "release", "review", "operations"}
# what several jobs and commands use (what synth reads too is the shared package's, decision_spec): the core package
# (cases, predictions, metrics, fits, scoring, results, bands, prices, the served record) and the top-level modules
CORE = {"core", "tables", "plots", "transport", "readback", "exit_codes"}
SHARED = {"commands", *CORE}
# what a job or the core may import beside the core: the shared package (the yes/no intercept fit shifts log-odds by
# decision_spec.contract.shift_log_odds, as the engine does) and the client package (through transport.py)
OUTSIDE = ("decision_spec", "decision_endpoints_client")
RENDERERS = {"decisionctl.tables", "decisionctl.review.summary"}  # what a command prints with: text, not work
COMMAND_LINES = 80
# Modules on a command's longest import chain, down to decision_spec.contract: 8, reached by eight commands, e.g.
# evaluate -> certification.evaluate_cases -> core.scoring -> core.cases -> readback -> the shared question_types ->
# schemas -> contract, and batch -> bulk.batch_job -> run_outputs -> core.results -> decision_spec.manifest ->
# answer_settings -> decision_settings -> contract (15 before issue 47, 13 midway: jobs imported each other, and
# metrics, the fits and scoring each other down through cases).
CLI_FLOORS = 8
SERVING = {
    "engine",
    "runtime",
    "service",
    "loading",
    "app",
    "handlers",
    "serve",
    "admission",
    "answers",
    "bulk",
    "state_cache",
}


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


def package(module: str) -> str:
    """The job package or shared module a decisionctl module is in (decisionctl.review.record: decisionctl.review)."""
    return ".".join(module.split(".")[:2])


def test_decisionctl_packages_import_each_other_in_no_circle() -> None:
    """A package that needs another's constant and is needed by it is one package in two folders: the constant goes
    in a leaf module (core.identity, evaluation_record) and certification runs after scoring, never inside it."""
    edges = {
        (package(m), package(d))
        for m, deps in GRAPH.items()
        if m.startswith("decisionctl.")
        for d in deps
        if d.startswith("decisionctl.") and package(m) != package(d)
    }
    above: dict[str, set[str]] = {}
    for a, b in edges:
        above.setdefault(a, set()).add(b)

    def below(p: str, seen: set[str]) -> set[str]:
        for q in above.get(p, set()) - seen:
            seen.add(q)
            below(q, seen)
        return seen

    circles = sorted(p for p in above if p in below(p, set()))
    assert circles == [], circles


def job_edges() -> set[tuple[str, str]]:
    """(module, what it imports) where a job package's or the core's module imports another job package, a command,
    or a project module outside decisionctl other than OUTSIDE's."""
    found = set()
    for module, deps in GRAPH.items():
        parts = module.split(".")
        if parts[0] != "decisionctl" or len(parts) < 2 or parts[1] not in JOBS | {"core"}:
            continue
        for dep in deps - {"decisionctl"}:
            if dep.startswith("decisionctl."):
                if dep.split(".")[1] not in CORE | {parts[1]}:
                    found.add((module, dep))
            elif not dep.startswith(OUTSIDE):
                found.add((module, dep))
    return found


def test_job_packages_sit_side_by_side_over_the_core() -> None:
    """A job imports its own modules, the core and the shared modules, never another job: what two jobs share is the
    core's (bulk writes results.json with core.results, not certification's; rollback reads the served record with
    core.served, not review's), and a command composes jobs. The core imports no job and no command."""
    assert job_edges() == set()


def test_a_job_importing_another_job_is_seen() -> None:
    """The check above can fail: bulk's run state writing certification's figures, and the core reaching up into a
    job, are both found."""
    added = {("decisionctl.bulk.run_state", "decisionctl.certification.automation")}
    added.add(("decisionctl.core.scoring", "decisionctl.review.record"))
    fresh = {(m, d) for m, d in added if d not in GRAPH[m]}
    try:
        for m, d in fresh:
            GRAPH[m].add(d)
        assert job_edges() == added
    finally:
        for m, d in fresh:
            GRAPH[m].discard(d)
    assert job_edges() == set()


def test_decisionctl_imports_no_stack() -> None:
    """The record's format and the DLC registries are decisionctl's leaf modules that synth reads, not the reverse:
    the CLI's wheel needs none of stacks/."""
    pulled = {
        (m, d) for m, deps in GRAPH.items() if m.startswith("decisionctl") for d in deps if d.startswith("stacks")
    }
    assert pulled == set()


@cache
def _functions(module: str) -> frozenset[str]:
    tree = ast.parse(MODULES[module].read_text())
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def use_cases_called(source: str) -> set[str]:
    """The functions of decisionctl's packages (not the commands' shared options, not the renderers) that a command
    module's code calls, as module.function: a call through a module (`deployed.check_environment(...)`) or through
    a name imported from one. Classes (options, results) and exceptions are not calls of work."""
    tree = ast.parse(source)
    names: dict[str, str] = {}  # local name -> the module, or module.attribute, it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("decisionctl"):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            names.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("decisionctl")})
    called = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in names:
            target = names[func.id]
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
            target = f"{names[func.value.id]}.{func.attr}"
        else:
            continue
        module, _, name = target.rpartition(".")
        work = not module.startswith("decisionctl.commands") and module not in RENDERERS
        if work and module in MODULES and target not in MODULES and name in _functions(module):
            called.add(target)
    return called


def command_modules() -> dict[str, str]:
    return {
        m: MODULES[m].read_text()
        for m in MODULES
        if m.startswith("decisionctl.commands.")
        and m not in {"decisionctl.commands.options", "decisionctl.commands.cli"}
    }


def test_every_command_is_a_page_of_arguments_around_one_use_case() -> None:
    """A command parses its arguments, builds plain options, calls one use-case function of a package and prints
    what it returns; a workflow in a command module is one no other caller (a test, a script) can reach."""
    long = {m: n for m, text in command_modules().items() if (n := len(text.splitlines())) >= COMMAND_LINES}
    assert long == {}, f"command modules of {COMMAND_LINES} lines or more: {long}"
    calls = {m: sorted(use_cases_called(text)) for m, text in command_modules().items()}
    assert {m: c for m, c in calls.items() if len(c) != 1} == {}


def test_a_command_with_a_workflow_is_seen() -> None:
    """The check above can fail: a command that runs two steps of a workflow itself is found (evaluate did, with
    16 calls into 4 modules, before issue 39)."""
    source = (
        "from decisionctl.core import scoring\n"
        "from decisionctl.core.bands import question_keys\n"
        "from decisionctl import tables\n"
        "def run(args):\n"
        "    run = scoring.score_cases([], None, args.out)\n"
        "    print(tables.evaluation(question_keys([])))\n"
        "    raise scoring.NotScored('x')\n"
    )
    assert use_cases_called(source) == {
        "decisionctl.core.scoring.score_cases",
        "decisionctl.core.bands.question_keys",
    }


def test_every_command_module_is_reachable_from_the_help() -> None:
    """A command module must be in a stage of commands.STAGES (ALL is built from it), or be the mode of one that is
    (compare_shadow is `compare --shadow`): a module left out parses nothing and fails no other test."""
    from decisionctl.commands import ALL

    listed = {f"decisionctl.commands.{command.module}" for command in ALL}
    modes = set().union(*(GRAPH[name] for name in listed))
    assert set(command_modules()) - listed - modes == set()
    assert "decisionctl.commands.compare_shadow" in modes - listed  # the one mode today, seen as one


def test_no_command_is_deeper_than_its_floors() -> None:
    deepest = max((m for m in MODULES if m.startswith("decisionctl.commands.")), key=floors)
    assert floors(deepest) <= CLI_FLOORS, f"{deepest} is {floors(deepest)} modules deep"
