"""decisionctl's sub-commands: one module each (NAME, HELP, add_arguments, run), grouped in STAGES in the order of
the work (package and call a model, measure and certify it, size it, review a release, watch it, then bulk and
live traffic); ALL is that order, the order of the top-level help."""

from __future__ import annotations

from types import ModuleType

from decisionctl.commands import (
    batch,
    bench,
    check_deployed,
    compare,
    cost,
    decide,
    decision_diff,
    evaluate,
    fit_prior,
    logs,
    outcomes,
    package_model,
    pin_images,
    record_evaluation,
    rollback,
    served_record,
    status,
)

STAGES: tuple[tuple[str, tuple[ModuleType, ...]], ...] = (
    ("package a model and call it", (package_model, decide)),
    ("measure and certify (docs/measure.md)", (fit_prior, evaluate, compare)),
    ("size the instances and choose a hosting mode (docs/deploy.md)", (bench, cost)),
    ("review a release (docs/deploy.md, the review loop)", (pin_images, record_evaluation, decision_diff)),
    ("check what is deployed", (check_deployed, served_record)),
    ("day two: watch, read the logs, go back (docs/byom.md, the second day)", (status, logs, rollback)),
    ("bulk decisions (docs/bulk.md)", (batch,)),
    ("live traffic (docs/loop.md)", (outcomes,)),
)
ALL: tuple[ModuleType, ...] = tuple(command for _, commands in STAGES for command in commands)
