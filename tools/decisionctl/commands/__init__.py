"""decisionctl's sub-commands: each named and described once here, grouped in STAGES in the order of the work
(package and call a model, measure and certify it, size it, review a release, watch it, then bulk and live
traffic), each run by a module of this package (add_arguments, run) that is imported only when its command runs;
ALL is that order, the order of the top-level help."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Command:
    """A sub-command: its name, its one line of help, and the module of this package that runs it."""

    name: str
    help: str
    module: str

    def load(self) -> ModuleType:
        """The module, imported now (its add_arguments and run)."""
        return importlib.import_module(f"{__name__}.{self.module}")


STAGES: tuple[tuple[str, tuple[Command, ...]], ...] = (
    (
        "package a model and call it",
        (
            Command("package-model", "verify a GGUF and build model.tar.gz + manifest.json", "package_model"),
            Command("decide", "send one decision request and print the answers", "decide"),
        ),
    ),
    (
        "measure and certify (docs/measure.md)",
        (
            Command(
                "fit-prior",
                "fit the model's prior over option slots from unlabeled requests into manifest.json",
                "fit_prior",
            ),
            Command("evaluate", "measure accuracy and calibration on labeled cases", "evaluate"),
            Command(
                "compare",
                "what changed between two evaluate runs (model, build, hardware, calibration, wording)",
                "compare",
            ),
        ),
    ),
    (
        "size the instances and choose a hosting mode (docs/deploy.md)",
        (
            Command("bench", "load-test one or two endpoints at several concurrency levels", "bench"),
            Command(
                "cost",
                "monthly cost of each hosting mode (instances, components, "
                "serverless) for a traffic profile; break-even",
                "cost",
            ),
        ),
    ),
    (
        "review a release (docs/deploy.md, the review loop)",
        (
            Command(
                "pin-images",
                "look up the DLC image digests through ECR (no Docker) and pin them in cdk.json",
                "pin_images",
            ),
            Command(
                "record-evaluation",
                "evaluate a packaged artifact on its environment's suite; write the record synth and deploys check",
                "record_evaluation",
            ),
            Command(
                "decision-diff",
                "compare two evaluation records of a suite: flips, accuracy, calibration, bands, actions; gates",
                "decision_diff",
            ),
        ),
    ),
    (
        "check what is deployed",
        (
            Command(
                "check-deployed",
                "score each deployed variant on the suite; fail if it is not "
                "the recorded artifact within the tolerance",
                "check_deployed",
            ),
            Command(
                "served-record",
                "write the evaluation record a deployed stack serves (by its "
                "EvaluationRecordSha256), found in git history",
                "served_record",
            ),
        ),
    ),
    (
        "day two: watch, read the logs, go back (docs/byom.md, the second day)",
        (
            Command(
                "status",
                "what an environment runs: endpoints, instances or copies, "
                "model, record in force, alarms, last deployment",
                "status",
            ),
            Command(
                "logs",
                "the adapter's decision and rejection lines (counts and "
                "names, never text), filtered, from CloudWatch Logs",
                "logs",
            ),
            Command(
                "rollback",
                "put the previous artifact's record and model block back (checked: it binds, it is in S3), to deploy",
                "rollback",
            ),
        ),
    ),
    (
        "bulk decisions (docs/bulk.md)",
        (
            Command(
                "batch",
                "run a JSONL file of decisions through Batch Transform, an async endpoint or a local adapter",
                "batch",
            ),
        ),
    ),
    (
        "live traffic (docs/loop.md)",
        (
            Command(
                "outcomes",
                "join captured answers with what people decided: labeled cases, reversal rates, band error on traffic",
                "outcomes",
            ),
        ),
    ),
)
ALL: tuple[Command, ...] = tuple(command for _, commands in STAGES for command in commands)
BY_NAME: dict[str, Command] = {command.name: command for command in ALL}
