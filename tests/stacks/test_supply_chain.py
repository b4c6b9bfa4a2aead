"""The supply chain: every action pinned by commit, every pip install hash-locked, in every file that installs.

The check reads the workflows, the composite actions, the Dockerfile and the buildspec as text: an action used
by tag (`uses: x/y@v6`) or a pip install that is not `--require-hashes -r <lock>` with a hash on every lock
entry fails it. It is shown to catch both on small bad samples, so a pass means something.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PINNED_USES = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s*v\d+(\.\d+)*\s*$")
USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(.+?)\s*$")
PIP = re.compile(r"\bpip3?\s+(install|wheel|download)\b")
LOCK_FLAG = re.compile(r"(?:^|\s)(?:-r|--requirement)\s+(\S+)")


def installing_files() -> list[Path]:
    """Every file that runs actions or installs packages: workflows, composite actions, Dockerfile, buildspec."""
    return sorted(
        [
            *(ROOT / ".github" / "workflows").glob("*.yml"),
            *(ROOT / ".github" / "actions").glob("*/action.yml"),
            ROOT / "containers" / "Dockerfile",
            *(ROOT / "buildspec").glob("*.yml"),
        ]
    )


def unhashed_lock_entries(lock: str) -> list[str]:
    """Requirements of a pip lock file without a --hash (each entry: a line, then its continuation lines)."""
    entries: list[list[str]] = []
    for line in lock.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace() and entries:
            entries[-1].append(line)
        else:
            entries.append([line])
    return [e[0].split()[0] for e in entries if not any("--hash=sha256:" in part for part in e)]


def findings(text: str, where: Path) -> list[str]:
    """What is not pinned: tag-pinned actions, and pip commands that install from anything but a hashed lock."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = USES.match(line)
        if match is None:
            continue
        target = match[1].strip("'\"")
        if target.startswith("./"):
            continue  # an action of this repository, read at the checked-out commit
        if not PINNED_USES.match(target):
            found.append(f"{where.name}:{number}: `uses: {target}` is not pinned by a 40-hex commit with its tag")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n\s*", " ", code)
    for command in re.split(r"&&|;|\n|\|\|", joined):
        if not PIP.search(command):
            continue
        shown = " ".join(command.split())
        if "--require-hashes" not in command:
            found.append(f"{where.name}: `{shown}` installs without --require-hashes")
            continue
        locks = LOCK_FLAG.findall(command)
        if not locks:
            found.append(f"{where.name}: `{shown}` installs without a hashed -r lock file")
        for lock in locks:
            local = where.parent / Path(lock.strip("'\"")).name
            if local.exists():
                missing = unhashed_lock_entries(local.read_text(encoding="utf-8"))
                if missing:
                    found.append(f"{where.name}: {local.name} has entries without a hash: {missing}")
    return found


def test_every_action_and_install_is_pinned() -> None:
    files = installing_files()
    assert {p.name for p in files} >= {"deploy.yml", "synth.yml", "action.yml", "Dockerfile", "image.yml"}
    problems = [problem for path in files for problem in findings(path.read_text(encoding="utf-8"), path)]
    assert problems == []


def test_the_locks_hash_every_entry() -> None:
    locks = [
        ROOT / ".github" / "actions" / "setup-cdk" / "requirements.lock",
        ROOT / "containers" / "requirements.lock",
        ROOT / "containers" / "build-requirements.lock",
    ]
    for lock in locks:
        text = lock.read_text(encoding="utf-8")
        assert re.search(r"^aws-cdk-lib==|^fastapi==|^scikit-build-core==", text, re.MULTILINE), lock
        assert unhashed_lock_entries(text) == [], lock


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line (names normalized as pip does)."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", path.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


def test_the_image_lock_pins_what_requirements_txt_pins() -> None:
    image = pins(ROOT / "containers" / "requirements.txt")
    assert pins(ROOT / "containers" / "requirements.lock") == image
    project = pins(ROOT / "requirements.txt")
    assert {name: project.get(name) for name in image} == image  # the image runs what the tests ran


def test_the_cdk_lock_pins_what_requirements_txt_pins() -> None:
    locked = pins(ROOT / ".github" / "actions" / "setup-cdk" / "requirements.lock")
    project = pins(ROOT / "requirements.txt")
    assert {"aws-cdk-lib", "cdk-nag", "constructs", "cfn-lint", "pydantic", "pyyaml"} <= set(locked)
    assert {name: project.get(name) for name in locked} == locked  # CI synthesizes with what the tests used


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("      - uses: actions/checkout@v6\n", "not pinned"),
        ("      - uses: actions/checkout@d23441a48e516b6c34aea4fa41551a30e30af803\n", "not pinned"),  # no tag
        ("      - uses: actions/checkout@main  # v6.1.0\n", "not pinned"),
        ("        run: pip install -c requirements.txt aws-cdk-lib\n", "without --require-hashes"),
        (
            "RUN python -m venv /v \\\n    && /v/bin/pip install --no-cache-dir \\\n       fastapi==1\n",
            "--require-hashes",
        ),
        ("        run: .venv/bin/pip install --require-hashes fastapi==1\n", "without a hashed -r lock"),
    ],
)
def test_the_check_catches_an_unpinned_sample(sample: str, expected: str) -> None:
    problems = findings(sample, ROOT / "sample.yml")
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_check_accepts_a_pinned_sample(tmp_path: Path) -> None:
    lock = tmp_path / "good.lock"
    lock.write_text("fastapi==0.165.0 \\\n    --hash=sha256:" + "a" * 64 + "\n", encoding="utf-8")
    sample = (
        "      - uses: actions/checkout@d23441a48e516b6c34aea4fa41551a30e30af803  # v6.1.0\n"
        "        run: pip install --require-hashes -r good.lock\n"
    )
    assert findings(sample, tmp_path / "sample.yml") == []
    lock.write_text("fastapi==0.165.0\n", encoding="utf-8")
    assert findings(sample, tmp_path / "sample.yml") == [
        "sample.yml: good.lock has entries without a hash: ['fastapi==0.165.0']"
    ]


def test_the_cdk_lock_holds_everything_decisionctl_imports() -> None:
    """The workflows' review steps run decisionctl from the checkout (setup-cdk puts its source on the path) on what
    the lock installs: every distribution a module reachable from decisionctl imports (the adapter's data modules,
    the client package and the stacks' plain modules among them), and all they require, must be pinned there."""
    from importlib.metadata import packages_distributions, requires

    from packaging.requirements import Requirement

    from tests.import_graph_support import GRAPH, MODULES, PACKAGES

    reached, todo = set(), [m for m in MODULES if m.startswith("decisionctl")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(GRAPH[module])
    names, optional = set(), set()
    for module in reached:
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        names |= _imported_names(tree)
        for node in ast.walk(tree):  # `try: import x / except ImportError:` is a fallback, not a requirement
            if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
                optional |= set().union(*(_imported_names(n) for n in [*node.body, *node.handlers]))
    names -= set(sys.stdlib_module_names) | set(PACKAGES) | {"__future__"} | optional
    distributions = packages_distributions()
    assert {n for n in names if n not in distributions} == set()  # every import resolves to an installed distribution
    needed, todo = set(), sorted({d for n in names for d in distributions[n]})
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in needed:
            continue
        needed.add(name)
        for line in requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    locked = pins(ROOT / ".github" / "actions" / "setup-cdk" / "requirements.lock")
    assert needed - set(locked) == set()


def _imported_names(tree: ast.AST) -> set[str]:
    """The top-level names of the absolute imports under `tree`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(c, ast.Name) and c.id in ("ImportError", "ModuleNotFoundError") for c in caught)
