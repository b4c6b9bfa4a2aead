"""The Jinja sandbox a model's own templates (chat or systemone) render in, and the tokenizer they are cut with."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

Tokenize = Callable[[str], Sequence[int]]  # the model's tokenizer: special tokens parsed, no BOS


def to_json(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    """`tojson` as in transformers' chat templates: plain JSON with non-ASCII kept, not HTML-escaped."""
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    raise TemplateError(message)


def sandbox() -> ImmutableSandboxedEnvironment:
    """The environment a model's own Jinja template (chat or systemone) renders in: sandboxed, blocks
    trimmed, and `raise_exception` and `tojson` as chat templates expect them."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = to_json
    env.globals["raise_exception"] = _raise
    return env
