"""Synth's check that an environment's committed evaluation record is the evaluation of the artifact it deploys.

Where the record binds (stacks/evaluation_config.py's read_binding finds no problem), the serving stack passes
the evaluated manifest's sha256 to the model preflight, outputs the record's sha256 and writes the answer settings
its run served into the container environment; a `model.answer_settings` value of cdk.json that contradicts them
stops synth whatever `enforce` says, naming both values, and so does one the record does not state (or any, where
no record binds). Where it does not bind, an
environment with `enforce: refuse` and a real model checksum stops synth; any other gets a warning on its
serving stack (an environment without an `evaluation` block too: it has no enforce setting to read).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from decision_spec.answer_settings import contradictions, shown
from decision_spec.environment_config import PLACEHOLDER_SHA256, ConfigError, EnvironmentConfig

from stacks.evaluation_config import Binding, fix_command, read_binding

WARNING_ID = "decision-endpoints:evaluation"


class EvaluationError(ConfigError):
    """The environment refuses to deploy an artifact its committed evaluation record does not evaluate."""


class AnswerSettingsContradicted(ConfigError):
    """cdk.json states an answer setting the evaluated artifact was not evaluated under."""


def check_evaluation(config: EnvironmentConfig, root: Path) -> Binding | None:
    """The binding of the environment's record (files read under `root`), None without a decision endpoint.

    Raises EvaluationError where the record does not bind and the environment refuses that.
    """
    if not config.decision_endpoints:
        return None
    key = f"environments.{config.name}.evaluation"
    evaluation = config.evaluation
    if evaluation is None:
        problem = (
            f"{key} is not configured: add a suite of labeled cases and the record of the deployed artifact's "
            f"evaluation on it (docs/deploy.md, `cdk.json` reference), recorded with {fix_command(config.name)}."
        )
        unbound = Binding(None, None, (problem,))
        check_answer_settings(config, "the evaluation record", unbound)
        return unbound
    binding = read_binding(root, config.name, evaluation, config.model.sha256)
    check_answer_settings(config, evaluation.record, binding)
    if binding.problems and evaluation.enforce == "refuse" and config.model.sha256 != PLACEHOLDER_SHA256:
        raise EvaluationError(
            f"{key}.enforce is refuse, and the evaluation record is not that of the artifact "
            f"environments.{config.name}.model names:\n  "
            + "\n  ".join(binding.problems)
            + f"\n  {key}: record the evaluation of the deployed artifact with {fix_command(config.name)}, commit "
            "the record, synthesize again"
        )
    return binding


def check_answer_settings(config: EnvironmentConfig, record: str, binding: Binding) -> None:
    """Refuse a `model.answer_settings` value that contradicts what the bound record's run served, naming both, and
    one the record does not state (or that no bound record states): the container would adopt a setting the
    artifact's answers, bands and policy were never measured under."""
    expected, recorded = config.model.answer_settings, binding.answer_settings
    if expected is None:
        return
    key = f"environments.{config.name}.model.answer_settings"
    held = recorded.recorded() if recorded is not None else {}
    unrecorded = {name: value for name, value in expected.recorded().items() if name not in held}
    if unrecorded:
        why = f"{record} does not record it" if recorded is not None else f"{record} does not bind (it states nothing)"
        raise AnswerSettingsContradicted(
            "cdk.json states answer settings the artifact was not evaluated under:\n  "
            + "\n  ".join(
                f"{key}.{name} is {shown(value)}, but {why}: the answers, bands and policy were measured without it; "
                f"remove {key}.{name}, or package the model with `--answer-setting {name}={shown(value)}`, evaluate "
                "and record it, and commit the record"
                for name, value in unrecorded.items()
            )
        )
    contradicted = contradictions(expected, recorded) if recorded is not None else {}
    if contradicted:
        raise AnswerSettingsContradicted(
            "the artifact was evaluated under other answer settings than cdk.json states:\n  "
            + "\n  ".join(
                f"{key}.{name} is {shown(mine)}, but {record} records {name} {shown(its)}: the answers, bands and "
                f"policy were measured under {shown(its)}; remove {key}.{name} (the adapter adopts the artifact's), "
                f"or package and evaluate the model under {shown(mine)} and commit the record"
                for name, (mine, its) in contradicted.items()
            )
        )


def warn_unbound(serving: cdk.Stack, binding: Binding | None) -> None:
    """One warning on the serving stack listing why the record does not bind; nothing where it does."""
    if binding is None or not binding.problems:
        return
    cdk.Annotations.of(serving).add_warning_v2(
        WARNING_ID,
        "the evaluation record does not bind to the deployed artifact, so the model preflight does not check "
        "the uploaded manifest against an evaluation: " + " ".join(binding.problems),
    )
