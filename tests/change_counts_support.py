"""Real changes, made step by step in a scratch copy of the committed tree, with the suite's structural checks run
after each step: how many files a change of a kind touches before those checks pass (docs/architecture.md's counts,
measured again by tests/test_change_counts.py rather than remembered from a thrown-away branch)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Step = tuple[str, Callable[[Path], None]]  # what the step adds, and the edit that adds it


def scratch(into: Path) -> Path:
    """The committed tree (git archive of HEAD: no .venv, .cache or untracked file) unpacked into `into`."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def with_model(tree: Path) -> Path:
    """`tree` with the checkout's bundled model linked where the tree's launcher looks for it (tests that answer on
    the model run in the tree too)."""
    models = tree / ".cache" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "smollm2").symlink_to(ROOT / ".cache" / "models" / "smollm2", target_is_directory=True)
    return tree


def tree_env(tree: Path) -> dict[str, str]:
    """The environment a process in `tree` runs with: the tree's own packages first on the path."""
    paths = [tree / "containers", tree / "tools", tree, tree / "clients" / "python"]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "PYTHONDONTWRITEBYTECODE": "1"}


def run_in(tree: Path, args: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """This Python run in `tree` with `args`, the tree's packages first on the path; its output captured."""
    return subprocess.run(
        [sys.executable, *args],
        check=False,
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def failing(tree: Path, tests: list[str]) -> list[str]:
    """The node ids of `tests` that fail in `tree`, its packages imported from the tree itself (ahead of the
    checkout's editable install on the path)."""
    done = run_in(tree, ["-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-o", "addopts=", *tests], timeout=600)
    found = sorted(set(re.findall(r"^FAILED (\S+)", done.stdout, re.M)))
    if done.returncode not in (0, 1) or (done.returncode == 1 and not found):
        raise RuntimeError(f"pytest could not run in the scratch tree (exit {done.returncode}):\n{done.stdout[-3000:]}")
    return found


def edit(path: Path, after: str, text: str) -> None:
    """Insert `text` right after the first line of `path` that starts with `after`."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(after))
    lines.insert(at + 1, text)
    path.write_text("".join(lines), encoding="utf-8")


def replace(path: Path, old: str, new: str, *, before: bool = False, after: bool = False) -> None:
    """Replace the first `old` in `path` with `new` (`before`, `after`: put `new` right before or after it instead)."""
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new + old if before else old + new if after else new, 1), encoding="utf-8")


# A new CLI command, `case-mix` (a labeled suite's cases per question type and expected answer), in three code
# files and two places in docs/cli.md.
USE_CASE = '''"""A labeled suite's mix: its cases per question type and expected answer (case-mix's use case)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from decisionctl.core.cases import load_cases


def case_mix(path: Path) -> list[list[object]]:
    counts = Counter((c.type, c.options[c.expected_index]) for c in load_cases(path))
    return [[kind, answer, n] for (kind, answer), n in sorted(counts.items())]
'''
COMMAND = '''"""decisionctl case-mix: a labeled suite's cases per question type and expected answer."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl import tables
from decisionctl.evaluation.case_mix import case_mix


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("cases", type=Path, help="a labeled JSONL file, as evaluate reads it")


def run(args: argparse.Namespace) -> int:
    print(tables.table(["type", "expected", "cases"], case_mix(args.cases)))
    return 0
'''


def new_command_steps() -> list[Step]:
    def modules(tree: Path) -> None:
        (tree / "tools/decisionctl/evaluation/case_mix.py").write_text(USE_CASE, encoding="utf-8")
        (tree / "tools/decisionctl/commands/case_mix.py").write_text(COMMAND, encoding="utf-8")

    def registry(tree: Path) -> None:
        entry = '            Command("case-mix", "count a suite\'s cases per type and expected answer", "case_mix"),\n'
        edit(tree / "tools/decisionctl/commands/__init__.py", '            Command("evaluate",', entry)

    def docs(tree: Path) -> None:
        cli_md = tree / "docs/cli.md"
        edit(
            cli_md,
            "| `evaluate` |",
            "| `case-mix` | counts a labeled suite's cases per question type and expected answer |\n",
        )
        section = "## `case-mix`\n\n`decisionctl case-mix CASES`: the suite's cases per type and expected answer.\n\n"
        replace(cli_md, "## `evaluate`", section, before=True)

    return [
        ("the use case and the command module", modules),
        ("its Command in STAGES", registry),
        ("docs/cli.md", docs),
    ]


NEW_COMMAND_CHECKS = [
    "tests/decisionctl/test_layout.py",
    "tests/decisionctl/test_cli_start.py::test_every_command_is_registered_once_with_a_module_that_runs_it",
    "tests/test_docs.py::test_cli_md_lists_every_command_in_the_order_of_the_help",
]


# A new setting that changes answers, `min_margin` (under a served policy, abstain where the pick leads the
# runner-up by less than this): the registry's field, its optional field on the artifact's AnswerSettings, x_run's
# field, the row every layer's tests read, the README's settings table, and the value in force reported in x_run.
# The engine code that would act on it is one more code file, which no check asks for (docs/architecture.md).
def new_answer_setting_steps() -> list[Step]:
    def registry(tree: Path) -> None:
        field = (
            "    min_margin: Tolerance | None = Field(\n"
            "        None,\n"
            '        description="Under a served policy, abstain where the pick leads by less than this.",\n'
            "        json_schema_extra=CHANGES_ANSWERS,\n"
            "    )\n"
        )
        registry_module = tree / "containers/decision_spec/decision_settings.py"
        replace(registry_module, "    log_text: bool = Field(", field, before=True)

    def artifact(tree: Path) -> None:
        field = (
            "    min_margin: Tolerance | None = Field(\n"
            '        None, description="DECISION_MIN_MARGIN: abstain where the pick leads by less than this."\n'
            "    )\n"
        )
        replace(tree / "containers/decision_spec/answer_settings.py", "    rotation_max_options: ", field, before=True)

    def identity(tree: Path) -> None:
        field = "    min_margin: float | None = None\n"
        edit(tree / "containers/decision_spec/schemas.py", "    min_label_mass: float | None = None", field)

    def served(tree: Path) -> None:  # the adapter reports the value in force (no check asks for this)
        new = '"min_label_mass": floor, "min_margin": settings.min_margin}'
        replace(tree / "containers/decision_adapter/loading.py", '"min_label_mass": floor}', new)

    def carried(tree: Path) -> None:
        edit(tree / "tests/answer_settings_support.py", '    "min_label_mass":', '    "min_margin": (0.1, 0.2),\n')

    def readme(tree: Path) -> None:
        row = "| `DECISION_MIN_MARGIN` | | Under a served policy, abstain where the pick leads by less than this |\n"
        edit(tree / "README.md", "| `DECISION_MIN_LABEL_MASS` |", row)

    return [
        ("the registry's field, tagged answers", registry),
        ("the artifact's AnswerSettings field", artifact),
        ("x_run's field, RunIdentity's", identity),
        ("its row in tests/answer_settings_support.py", carried),
        ("its row in the README's settings table", readme),
        ("the value in force in x_run (loading.served_answer_settings)", served),
    ]


NEW_ANSWER_SETTING_CHECKS = [
    "tests/stacks/test_adapter_settings.py::test_every_adapter_setting_has_one_kind_and_each_kind_its_one_home",
    "tests/decisionctl/test_answer_settings_carried.py::test_every_answer_setting_has_a_row_and_its_value_is_not_the_default",
    "tests/adapter/test_settings.py::test_readme_settings_table_is_the_settings_fields",
    "tests/decisionctl/test_answer_settings_carried.py::test_x_run_has_a_field_for_every_answer_setting",
]


# A new question type with a categorical answer, `likert` (agreement with a statement on five fixed levels, answered
# as a score is: the expected level and a probability per level): its name, levels and shape in the contract, its
# models in the schemas, its kind, OpenAI's models and their translation, decisionctl's readback, and the two test
# files that pin the type list (the wording of the list, the temperatures every answer's x_run reports).
LIKERT_LEVELS = '("Strongly disagree", "Disagree", "Neither agree nor disagree", "Agree", "Strongly agree")'
LIKERT_QUESTION = """

class LikertQuestion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["likert"]
    instructions: Text | None = None  # the statement agreed or disagreed with
    x_out_of_scope: OutOfScope = False
    x_slot_probabilities: SlotProbabilities = False
"""
LIKERT_ANSWER = """

class LikertAnswer(AnswerExtensions):
    type: Literal["likert"] = "likert"
    score: float  # the expected level, sum of i * p_i
    legend: dict[str, Text]
    probabilities: dict[str, float]
    confidence: float
"""
LIKERT_KIND = '''

class LikertKind(ScoreKind):
    """Agreement with a statement on contract.LIKERT_LEVELS, answered as a score: the expected level."""

    name = "likert"
    answer_shape = SHAPE_OF_TYPE[name]
    question_model = LikertQuestion
    answer_model = LikertAnswer
    default_instructions = "How much does the text agree with the statement?"

    def options(self, question: Any) -> list[Option]:
        return [Option(str(i), level, level) for i, level in enumerate(contract.LIKERT_LEVELS)]

    def answer(self, question: Any, keys: list[str], probs: list[float], extensions: dict[str, Any]) -> Any:
        return LikertAnswer(
            score=contract.score_expectation(probs),
            legend={str(i): level for i, level in enumerate(contract.LIKERT_LEVELS)},
            probabilities={str(i): p for i, p in enumerate(probs)},
            confidence=contract.score_confidence(probs),
            **extensions,
        )
'''
OPENAI_LIKERT_QUESTION = """

class OpenAILikertQuestion(_Question):
    model_config = ConfigDict(title="LikertQuestion")
    type: Literal["likert"]
"""
OPENAI_LIKERT_ANSWER = """

class OpenAILikertAnswer(AnswerExtensions):
    type: Literal["likert"] = "likert"
    name: str | None = None
    score: float
    confidence: float
    probabilities: list[ScoreProbability]
"""
LIKERT_READBACK = """

class LikertReadback(ScoreReadback):
    name = "likert"

    def case_options(self, criteria: Any) -> tuple[str, ...]:
        return tuple(str(i) for i in range(len(contract.LIKERT_LEVELS)))

    def case_question(self, answer: Any, final: str) -> tuple[dict[str, Any], Any]:
        return {}, int(final)
"""


def new_question_type_steps() -> list[Step]:
    def contract_(tree: Path) -> None:
        path = tree / "containers/decision_spec/contract.py"
        replace(
            path,
            'QuestionType = Literal["noul", "choice", "score"]',
            'QuestionType = Literal["noul", "choice", "score", "likert"]',
        )
        replace(path, '"score": "categorical"}', '"score": "categorical", "likert": "categorical"}')
        edit(path, "MIN_SCORE_LEVELS, MAX_SCORE_LEVELS", f"LIKERT_LEVELS = {LIKERT_LEVELS}\n")

    def schemas(tree: Path) -> None:
        path = tree / "containers/decision_spec/schemas.py"
        replace(path, "\n\nAnyQuestion = ", LIKERT_QUESTION, before=True)
        replace(
            path,
            "AnyQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion",
            "AnyQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion | LikertQuestion",
        )
        replace(path, "\n\nAnswer = Annotated[", LIKERT_ANSWER, before=True)
        replace(
            path,
            "NoulAnswer | ChoiceAnswer | ScoreAnswer, Field",
            "NoulAnswer | ChoiceAnswer | ScoreAnswer | LikertAnswer, Field",
        )

    def kind(tree: Path) -> None:
        path = tree / "containers/decision_spec/question_types.py"
        replace(path, "    NoulAnswer,\n", "    LikertAnswer,\n    LikertQuestion,\n", before=True)
        replace(path, "\n\n# In contract.QUESTION_TYPES order", LIKERT_KIND, before=True)
        replace(
            path, "(NoulKind(), ChoiceKind(), ScoreKind())", "(NoulKind(), ChoiceKind(), ScoreKind(), LikertKind())"
        )

    def openai_models(tree: Path) -> None:
        path = tree / "containers/decision_adapter/openai_schemas.py"
        replace(path, "\n\nOpenAIQuestion = Annotated[", OPENAI_LIKERT_QUESTION, before=True)
        replace(path, "OpenAIScoreQuestion, Field(", "OpenAIScoreQuestion | OpenAILikertQuestion, Field(")
        replace(path, "\n\nclass OpenAIRefusalAnswer", OPENAI_LIKERT_ANSWER, before=True)
        replace(
            path,
            "OpenAIScoreAnswer | OpenAIRefusalAnswer",
            "OpenAIScoreAnswer | OpenAILikertAnswer | OpenAIRefusalAnswer",
        )
        names = (
            '    "LikertQuestion": "decision_adapter__schemas__LikertQuestion",\n'
            '    "OpenAILikertQuestion": "decision_adapter__openai_schemas__LikertQuestion",\n'
        )
        edit(path, '    "OpenAIScoreQuestion":', names)

    def openai_translation(tree: Path) -> None:
        path = tree / "containers/decision_adapter/openai_decisions.py"
        replace(path, "from decision_spec.schemas import AnyQuestion, ", "LikertQuestion, ", after=True)
        asked = (
            "        elif isinstance(q, oa.OpenAILikertQuestion):\n"
            "            labels[qid] = list(LIKERT_LEVELS)\n"
            '            questions[qid] = LikertQuestion.model_construct(type="likert", **common)\n'
        )
        replace(path, "    return Parsed(asked(body.model", asked, before=True)
        answered = (
            '    if qtype == "likert":\n'
            "        return oa.OpenAILikertAnswer(\n"
            "            name=name,\n"
            "            score=contract.score_expectation(probs),\n"
            "            confidence=contract.score_confidence(probs),\n"
            "            probabilities=[\n"
            "                oa.ScoreProbability(label=LIKERT_LEVELS[i], value=i, probability=p)\n"
            "                for i, p in enumerate(probs)\n"
            "            ],\n"
            "            **extensions,\n"
            "        )\n"
        )
        replace(path, "    labels = parsed.labels[qid]\n", answered, before=True)
        replace(
            path,
            "from decision_spec.question_types import",
            "from decision_spec.contract import LIKERT_LEVELS\n",
            before=True,
        )

    def readback(tree: Path) -> None:
        path = tree / "tools/decisionctl/readback.py"
        replace(path, "\n\n# In contract.QUESTION_TYPES order", LIKERT_READBACK, before=True)
        replace(
            path,
            "(NoulReadback(), ChoiceReadback(), ScoreReadback())",
            "(NoulReadback(), ChoiceReadback(), ScoreReadback(), LikertReadback())",
        )

    def tests_(tree: Path) -> None:
        replace(
            tree / "tests/adapter/test_question_types.py",
            'types_phrase() == "noul, choice or score"',
            'types_phrase() == "noul, choice, score or likert"',
        )
        replace(
            tree / "tests/adapter/test_question_types.py",
            'match="noul, choice or score"',
            'match="noul, choice, score or likert"',
        )
        replace(
            tree / "tests/adapter/test_gguf_schemes.py",
            '"score": 1.0, "choice.3_5": 0.75}',
            '"score": 1.0, "likert": 1.0, "choice.3_5": 0.75}',
        )

    return [
        ("its name, levels and shape in the contract", contract_),
        ("its request and answer models in the schemas", schemas),
        ("its kind, listed in KINDS", kind),
        ("OpenAI's question and answer models", openai_models),
        ("OpenAI's request parsed and its answer rendered", openai_translation),
        ("decisionctl's readback", readback),
        ("the two test files that pin the type list", tests_),
    ]


NEW_QUESTION_TYPE_CHECKS = ["tests/adapter/test_question_types.py", "tests/decisionctl/test_readback.py"]  # no model
# the one check that answers on the model (it pins the temperatures every answer reports): run where it can change
PINNED_TEMPERATURES = "tests/adapter/test_gguf_schemes.py::test_gguf_temperatures_are_softmax_of_logits_over_t"


# Both routes asked a likert question by the tree's own adapter, started as `serve` on the bundled model: what each
# answers (the probabilities per level and the expected level), as JSON on stdout.
ASK_LIKERT = """
import json, sys, tempfile
from pathlib import Path

import httpx
from decision_adapter.launcher import start_adapter

state = "The delivery came two days late, but support refunded the shipping at once and apologised."
statement = "The customer is satisfied with how the problem was handled."
adapter = start_adapter(Path(tempfile.mkdtemp()))
try:
    with httpx.Client(base_url=adapter.url, timeout=120) as http:
        question = {"type": "likert", "instructions": statement}
        one = http.post("/v1/systemone", json={"state": state, "questions": {"q": question}})
        two = http.post("/v1/decisions", json={"model": "jev-latest", "input": state, "questions": [question]})
    print(json.dumps({"systemone": [one.status_code, one.json()], "decisions": [two.status_code, two.json()]}))
finally:
    adapter.stop()
"""
