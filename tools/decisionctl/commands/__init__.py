"""decisionctl's sub-commands: one module each (NAME, HELP, add_arguments, run), listed in help order in ALL."""

from __future__ import annotations

from types import ModuleType

from decisionctl.commands import (
    batch,
    bench,
    check_deployed,
    compare,
    decide,
    decision_diff,
    evaluate,
    fit_prior,
    outcomes,
    package_model,
    pin_images,
    record_evaluation,
    served_record,
)

ALL: tuple[ModuleType, ...] = (
    decide,
    package_model,
    evaluate,
    fit_prior,
    bench,
    compare,
    record_evaluation,
    decision_diff,
    check_deployed,
    served_record,
    outcomes,
    batch,
    pin_images,
)
