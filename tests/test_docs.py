"""The docs name only what exists (issue 37): README.md and docs/*.md are read as Markdown, and every
`decisionctl` command and option, `./dev` subcommand, cdk.json key, resource name (`decision-<env>-cpu`),
AWS region, relative link (with its #anchor) and repository path they write is looked up in the code: the
CLI's parser, dev's case branches, the config models, the f-strings the stacks name resources with, cdk.json,
and the files in git. Prose is left alone: commands, keys and paths are read from code (spans and fenced
blocks), names and regions by their shape.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import itertools
import json
import re
import subprocess
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
ENV_PLACEHOLDERS = ("<env>", "<ENV>", "ENV")
ANY = "*"  # a key under which any name is allowed (tags, per-type maps)
EXTERNAL_PATHS = {"tools/server/server-decision.cpp"}  # llama.cpp's, named by decision-tuned-models.md
FILE_SUFFIXES = {"py", "md", "json", "jsonl", "yml", "yaml", "png", "gz", "tar", "txt", "csv", "toml", "lock", "sh"}
# where the docs' paths and dotted names written from inside a package (`evaluation/cases.py`) resolve
PACKAGES = ("tools/decisionctl", "containers/decision_adapter", "clients/python/decision_endpoints_client", "stacks")

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*$", re.M)
REGION = re.compile(r"\b[a-z]{2}(?:-gov)?-(?:north|south|east|west|central)(?:east|west)?-\d\b")
# a command line: at the start of a block's line or a span, or after ; && | $( (assignments and a path may lead)
COMMAND = re.compile(r"(?:^|[;&|(])\s*(?:[A-Z_]+=(?:<[^>]*>|\S*)\s+)*(?:[\w.-]*/)*(decisionctl|\./dev)[ \t]+([^;&`]*)")
PATH = re.compile(r"(?<![\w/.:-])([\w.-]+/[\w./-]*[\w/])")


@dataclass(frozen=True)
class Fragment:
    line: int
    text: str
    code: bool  # a code span or a line of a fenced block, not prose


@dataclass(frozen=True)
class Project:
    """What the docs may name, read from the code."""

    root: Path
    commands: dict[str, argparse.ArgumentParser]  # "evaluate", "batch run": the parser that reads its options
    dev_commands: frozenset[str]
    environments: frozenset[str]
    context_keys: dict[str, Any]  # cdk.json's context: key -> subtree of allowed keys (None: a leaf)
    resource_names: frozenset[str]  # every name the stacks give, per environment and as written with <env>
    regions: frozenset[str]
    files: frozenset[str]  # tracked files and their folders, and the paths cdk.json names


# ---- reading Markdown -----------------------------------------------------------------------------------


def fragments(text: str) -> Iterator[Fragment]:
    """Fenced blocks by logical line (a line ending in a backslash, or an indented one, continues the one
    before), code spans, and the prose around them with its spans blanked out."""
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        lines: list[tuple[int, str]] = []
        for offset, line in enumerate(block.group(1).splitlines()):
            if lines and (lines[-1][1].endswith("\\") or line[:1].isspace()):
                lines[-1] = (lines[-1][0], lines[-1][1].rstrip("\\") + " " + line)
            else:
                lines.append((first + offset, line))
        yield from (Fragment(number, line, code=True) for number, line in lines)
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for number, line in enumerate(prose.splitlines(), start=1):
        for span in SPAN.findall(line):
            yield Fragment(number, span, code=True)
        yield Fragment(number, SPAN.sub(" ", line), code=False)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        found.add(f"{base}-{counts[base]}" if base in counts else base)
        counts[base] = counts.get(base, 0) + 1
    return found


# ---- what the code defines --------------------------------------------------------------------------------


def model_keys(annotation: Any) -> dict[str, Any] | str | None:
    """The keys a cdk.json object read into `annotation` may hold: a tree, ANY for maps, None for a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {field.alias or name: model_keys(field.annotation) for name, field in annotation.model_fields.items()}
    if get_origin(annotation) is dict:
        return ANY
    merged: dict[str, Any] = {}
    for arg in get_args(annotation) if get_origin(annotation) in (Union, types.UnionType, tuple, list) else ():
        sub = model_keys(arg)
        if isinstance(sub, dict):
            merged.update(sub)
    return merged or None


def stack_names(environments: frozenset[str]) -> frozenset[str]:
    """The resource names the stacks write as f"decision-{...}-..." / f"chat-{...}" (in stacks/, and the names they
    share with decisionctl in decision_spec/names.py), for every value of each slot."""
    from decision_spec.environment_config import IMAGE_FLAVOURS

    slots = {"section": set(IMAGE_FLAVOURS), "chat.flavour": set(IMAGE_FLAVOURS.values())}
    env_values = set(environments) | set(ENV_PLACEHOLDERS)
    names: set[str] = set()
    for source in [*sorted((ROOT / "stacks").glob("*.py")), ROOT / "containers" / "decision_spec" / "names.py"]:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)):
                continue
            if not str(node.values[0].value).startswith(("decision-", "chat-")):
                continue
            choices: list[list[str]] = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    choices.append([str(part.value)])
                    continue
                assert isinstance(part, ast.FormattedValue)
                expr = ast.unparse(part.value)
                is_env = expr in ("environment", "env", "env_name") or expr.endswith(".name")
                assert is_env or expr in slots, f"{source.name}: teach tests/test_docs.py what {{{expr}}} can be"
                choices.append(sorted(env_values if is_env else slots[expr]))
            names.update("".join(p) for p in itertools.product(*choices))
    return frozenset(names)


def parser_commands() -> dict[str, argparse.ArgumentParser]:
    from decisionctl.commands.cli import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}"] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


@cache
def project() -> Project:
    from decision_spec.environment_config import EnvironmentConfig
    from decision_spec.github_config import GitHubDeploy
    from decisionctl.core.prices import load_prices

    cdk_json = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    environments = cdk_json["context"]["environments"]
    env_keys = model_keys(EnvironmentConfig)
    assert isinstance(env_keys, dict)
    for name, sub in env_keys.items():  # every section is switched by `enabled` (environment_config.py)
        if isinstance(sub, dict) and name != "dlc":
            sub.setdefault("enabled", None)
    context_keys: dict[str, Any] = {key: None for key in cdk_json["context"]}
    context_keys.update(environments=env_keys, github=model_keys(GitHubDeploy))
    case = re.search(r'case "\$\{1:-\}" in(.*?)\besac\b', (ROOT / "dev").read_text(encoding="utf-8"), re.S)
    assert case is not None
    dev = {word for branch in re.findall(r"^\s+([\w|]+)\)", case.group(1), re.M) for word in branch.split("|")}
    git = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]  # in git, or to be added
    tracked = subprocess.run(git, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = {str(parent) for f in tracked.split() for parent in (Path(f), *Path(f).parents)} - {"."}
    named = [e["evaluation"][k] for e in environments.values() if "evaluation" in e for k in ("suite", "record")]
    return Project(
        root=ROOT,
        commands=parser_commands(),
        dev_commands=frozenset(dev),
        environments=frozenset(environments),
        context_keys=context_keys,
        resource_names=stack_names(frozenset(environments)),
        regions=frozenset({e["region"] for e in environments.values()} | {load_prices().region}),
        files=frozenset(files | set(named)),
    )


# ---- the checks ---------------------------------------------------------------------------------------------


def command_problems(fragment: Fragment, p: Project) -> Iterator[str]:
    code = re.sub(r"(^|\s)#.*", "", fragment.text) if fragment.code else ""
    for tool, rest in COMMAND.findall(code):
        words = rest.split()
        if tool == "./dev":
            if words and re.fullmatch(r"[a-z]+", words[0]) and words[0] not in p.dev_commands:
                yield f"`./dev {words[0]}`: dev has {', '.join(sorted(p.dev_commands))}"
            continue
        if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]):
            continue  # `decisionctl` alone, or an option shared by several commands
        name = words[0]
        if len(words) > 1 and f"{name} {words[1]}" in p.commands:
            name = f"{name} {words[1]}"
        if name not in p.commands or any(key.startswith(f"{name} ") for key in p.commands):
            yield f"`decisionctl {' '.join(words[:2])}`: no such command ({', '.join(sorted(p.commands))})"
            continue
        known = {s for action in p.commands[name]._actions for s in action.option_strings}
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
            if option not in known:
                yield f"`decisionctl {name} {option}`: {name} has no such option"


def key_problems(fragment: Fragment, p: Project) -> Iterator[str]:
    token = fragment.text.strip().rstrip(".")
    if fragment.code and re.fullmatch(r"@aws-cdk[\w/.:-]+", token) and token not in p.context_keys:
        yield f"`{token}`: no such key in cdk.json's context"
    if not fragment.code or not re.fullmatch(r"[a-z_<>][\w<>]*(?:\.[\w<>-]+)+", token):
        return
    parts = token.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return
    if parts[0] == "context":
        parts = parts[1:]
    if parts[0] == "environments" and len(parts) > 2 and parts[1] not in p.environments | set(ENV_PLACEHOLDERS):
        yield f"`{token}`: cdk.json has no environment {parts[1]}"
    trees, rest = _trees_of(parts, p)
    if trees and not any(_resolves(tree, rest) for tree in trees):
        yield f"`{token}`: no such key in cdk.json (decision_spec's models)"


def _trees_of(parts: list[str], p: Project) -> tuple[list[Any], list[str]]:
    """The key trees `parts` may be a path in, and the path in them; no tree where `parts` is no cdk.json key."""
    env_tree = p.context_keys["environments"]
    rooted = {
        "environments": ([env_tree], 2),
        "github": ([p.context_keys["github"]], 1),
        "<endpoint>": ([env_tree[s] for s in ("cpu", "gpu", "chat")], 1),
    }
    if parts[0] in rooted:
        trees, skip = rooted[parts[0]]
        return (trees if len(parts) > skip else []), parts[skip:]
    if python_name(parts, p):
        return [], parts  # `evaluation.scoring`, `autoscaling.variant_scalable_target`: a module or what it defines
    if parts[0] in env_tree:
        return [env_tree], parts
    relative = parts[0] in set(_all_keys(env_tree))  # a key relative to a section (`autoscaling.min_instances`)
    return (list(_subtrees(env_tree)) if relative else []), parts


def python_name(parts: list[str], p: Project) -> bool:
    """Whether `a.b` names a module of a package (a/b.py) or something a module a.py defines at its top."""
    for base in (p.root / package for package in ("", *PACKAGES, "tools", "containers")):
        if (base / parts[0] / f"{parts[1]}.py").is_file() or (base / parts[0] / parts[1] / "__init__.py").is_file():
            return True
        module = base / f"{parts[0]}.py"
        if module.is_file() and re.search(rf"^(?:def|class) {parts[1]}\b|^{parts[1]} *[:=]", module.read_text(), re.M):
            return True
    return False


def _resolves(tree: Any, parts: list[str]) -> bool:
    for part in parts:
        if tree == ANY:
            return True
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def _subtrees(tree: Any) -> Iterator[dict[str, Any]]:
    if isinstance(tree, dict):
        yield tree
        for sub in tree.values():
            yield from _subtrees(sub)


def _all_keys(tree: Any) -> Iterator[str]:
    for sub in _subtrees(tree):
        yield from sub


def name_problems(fragment: Fragment, p: Project) -> Iterator[str]:
    envs = "|".join(sorted(map(re.escape, p.environments | set(ENV_PLACEHOLDERS))))
    pattern = rf"(?<![\w-])(?:decisions?|chat)-(?:{envs})(?:-(?:[a-z0-9]+|<[a-z]+>|\*))*(?![\w-])"
    for name in re.findall(pattern, fragment.text):
        glob = re.sub(r"<(?!env>|ENV>)[a-z]+>", "*", name)  # `chat-<env>-<flavour>`: any flavour
        if not any(fnmatch.fnmatchcase(known, glob) for known in p.resource_names):
            named = sorted(n for n in p.resource_names if "-<env>" in n)
            where = "stacks/*.py, decision_spec/names.py"
            yield f"`{name}`: no resource of the stacks ({where}) is named so; they name {', '.join(named)}"


def region_problems(fragment: Fragment, p: Project) -> Iterator[str]:
    for region in REGION.findall(fragment.text):
        if region not in p.regions:
            yield f"region {region}: cdk.json's environments are in {', '.join(sorted(p.regions))}"


def path_problems(doc: Path, fragment: Fragment, p: Project, own_anchors: set[str]) -> Iterator[str]:
    if not fragment.code:
        for target in LINK.findall(fragment.text):
            yield from _link_problems(doc, target, p, own_anchors)
    bases = {"", *(f"{Path(package).parent}/".removeprefix("./") for package in PACKAGES)}
    bases |= {f"{package}/" for package in PACKAGES}
    tops = {f.split("/")[0] for f in p.files} | {Path(package).name for package in PACKAGES}
    for path in PATH.findall(fragment.text):
        if path.split("/")[0] not in tops or re.search(r"[<>*{}…]|\.\.\.", path) or path in EXTERNAL_PATHS:
            continue
        if not any(f"{base}{path}".rstrip("/") in p.files for base in bases):
            yield f"{path}: no such file or folder in the repository"


def _link_problems(doc: Path, target: str, p: Project, own_anchors: set[str]) -> Iterator[str]:
    if re.match(r"[a-z]+:", target):
        return  # https:, mailto:
    where, _, anchor = target.partition("#")
    if not where:
        if anchor not in own_anchors:
            yield f"link {target}: {doc.name} has no heading #{anchor}"
        return
    path = (doc.parent / where).resolve()
    if not path.is_relative_to(p.root) or str(path.relative_to(p.root)) not in p.files:
        yield f"link {target}: no such file in the repository"
    elif anchor and (path.suffix != ".md" or anchor not in anchors(path.read_text(encoding="utf-8"))):
        yield f"link {target}: {path.name} has no heading #{anchor}"


def problems(doc: Path, text: str, p: Project) -> list[str]:
    """Every reference of `text` (the Markdown of `doc`) to something the project does not have."""
    found: list[str] = []
    own_anchors = anchors(text)
    for fragment in fragments(text):
        for check in (command_problems, key_problems, name_problems, region_problems):
            found.extend(f"{doc.name}:{fragment.line}: {msg}" for msg in check(fragment, p))
        found.extend(f"{doc.name}:{fragment.line}: {msg}" for msg in path_problems(doc, fragment, p, own_anchors))
    return found


# ---- the tests ----------------------------------------------------------------------------------------------


def test_the_docs_name_only_what_exists() -> None:
    p = project()
    found = [problem for doc in DOCS for problem in problems(doc, doc.read_text(encoding="utf-8"), p)]
    assert found == []


def test_each_kind_of_bad_reference_is_found() -> None:
    """A copy of cli.md with one wrong reference of each kind: each is reported once, by its line."""
    p = project()
    doc = ROOT / "docs" / "cli.md"
    good = doc.read_text(encoding="utf-8")
    bad = [
        "`decisionctl evaluat my.jsonl`",
        "`decisionctl evaluate --no-such-flag`",
        "```bash\ndecisionctl batch go CASES.jsonl\n```",
        "`./dev lint`",
        "`cpu.autoscaling.target_requests`",
        "`environments.staging.region`",
        "`@aws-cdk/core:noSuchFlag`",
        "the endpoint decisions-prod answers",
        "`decision-prod` is the endpoint",
        "in eu-west-1",
        "[the guide](deploy.md#no-such-section)",
        "[below](#no-such-heading)",
        "[the contract](../../shared/docs/decision-api.md)",
        "`tools/decisionctl/data/no-such-prices.json`",
    ]
    found = problems(doc, good + "\n" + "\n\n".join(bad) + "\n", p)
    assert len(found) == len(bad), found
    assert problems(doc, good, p) == []
    prose = "decisionctl runs evaluate on the cases; a decision-making process; run ./dev and see docs\n"
    assert problems(doc, prose, p) == []


def test_cli_md_lists_every_command_in_the_order_of_the_help() -> None:
    """`decisionctl --help` lists every command once, stage by stage in the order of the work, and so does cli.md."""
    from decisionctl.commands import ALL, STAGES
    from decisionctl.commands.cli import build_parser

    names = [command.name for command in ALL]
    helped = build_parser().format_help()
    listed_in_help = re.findall(r"^    (\S+)  ", helped, re.M)
    assert listed_in_help == names and sorted(names) == sorted(parser_commands().keys() - {"batch run"})
    assert all(f"  {stage}:" in helped for stage, _ in STAGES)
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    table = re.search(r"^\| subcommand \|.*?\n\n", text, re.M | re.S)
    assert table is not None
    listed = [row.split("`")[1].split()[0] for row in table.group(0).splitlines()[2:] if row]
    assert listed == names
    sections = {heading.strip("`").split()[0] for heading in re.findall(r"^## (`[^`]+`)", text, re.M)}
    assert {command.name for command in ALL} <= sections


def test_cli_md_names_the_keys_an_evaluation_record_holds() -> None:
    """The record table of cli.md against a record as decisionctl.review.record builds it."""
    from datetime import UTC, datetime

    from decision_spec.manifest import Manifest
    from decisionctl.core.labeled import Prediction
    from decisionctl.review import record as records

    from tests.decisionctl_support import x_run

    manifest = Manifest(model_file="model.gguf", sha256="ab" * 32, size_bytes=1)
    prediction = Prediction("c1", "noul", ["yes", "no"], [0.6, 0.4], 0, 0, 0.6, None, 1.0, manifest.sha256, 0.1)
    record = records.build(
        predictions=[prediction],
        case_sha256={"c1": "0" * 64},
        keys={},
        identity=x_run(model_sha256=manifest.sha256),
        manifest=manifest,
        manifest_bytes=b"{}",
        suite_path="evaluation/support-suite.jsonl",
        suite_bytes=b"{}\n",
        cases=1,
        created=datetime(2026, 12, 2, tzinfo=UTC),
    )
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    table = re.search(r"^\| Key \| Holds \|.*?\n\n", text, re.M | re.S)
    assert table is not None
    rows = {row.split("`")[1]: row for row in table.group(0).splitlines()[2:] if row}
    assert set(rows) == set(record)
    assert set(SPAN.findall(rows["answers"].split("|")[2])) == set(record["answers"]["c1"])
