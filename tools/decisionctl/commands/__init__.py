"""decisionctl's sub-commands: one module each (NAME, HELP, add_arguments, run), listed in help order in ALL."""

from __future__ import annotations

from types import ModuleType

ALL: tuple[ModuleType, ...] = ()
