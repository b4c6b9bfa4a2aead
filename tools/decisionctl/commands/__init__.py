"""decisionctl's sub-commands: one module each (NAME, HELP, add_arguments, run), listed in help order in ALL."""

from __future__ import annotations

from types import ModuleType

from decisionctl.commands import (
    batch,
    bench,
    compare,
    decide,
    evaluate,
    fit_prior,
    outcomes,
    package_model,
    pin_images,
)

ALL: tuple[ModuleType, ...] = (
    decide,
    package_model,
    evaluate,
    fit_prior,
    bench,
    compare,
    outcomes,
    batch,
    pin_images,
)
