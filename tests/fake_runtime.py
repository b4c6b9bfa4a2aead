"""A scripted stand-in for LlamaRuntime, for unit tests of the engine's logic without a model.

The real runtime is tested on the real model in test_adapter_decisions.py (and the other model tests); this
one tokenizes deterministically, one token a character (a space joins the character after it, as BPE
tokenizers make " A" one token), keeps the same unit bookkeeping as LlamaRuntime.eval_units, records what it
decodes, and returns the logits a test scripts for the unit it evaluated last.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from decision_adapter.core.caller_text import unmark
from decision_adapter.runtime import NeedsRestore, Unit

SPACED = 256  # " c" is the token SPACED + ord(c)
BOS = 2 * SPACED
VOCAB = BOS + 1
OTHER_LOGIT = 0.0  # every token the script does not name
END = "<end>"  # a script's name for the end-of-turn token (BOS doubles as it: neither is ever text)

# The script: the text of the unit evaluated last -> logits by token text (" A"), or None for none named.
Script = Callable[[str], Mapping[str, float] | None]


def encode(text: str, *, add_bos: bool = False) -> Unit:
    """The stand-in's tokenizer: Latin-1 characters only (the tests' prompts are ASCII)."""
    out = [BOS] if add_bos else []
    i = 0
    while i < len(text):
        if text[i] == " " and i + 1 < len(text):
            out.append(SPACED + _code(text[i + 1]))
            i += 2
        else:
            out.append(_code(text[i]))
            i += 1
    return tuple(out)


def decode(unit: Unit) -> str:
    parts = []
    for t in unit:
        if t == BOS:
            continue
        parts.append(" " + chr(t - SPACED) if t >= SPACED else chr(t))
    return "".join(parts)


def _code(char: str) -> int:
    code = ord(char)
    if code >= SPACED:
        raise ValueError(f"the fake tokenizer reads Latin-1 only, not {char!r}")
    return code


class FakeRuntime:
    """A scripted stand-in for LlamaRuntime (the real one runs the real model in test_adapter_decisions.py).

    What DecisionEngine reads of LlamaRuntime: n_ctx, tokenize, units, eval_units, tokens_decoded, forget,
    snapshot, restore, partial_rewind. `partial_rewind=False` behaves like a recurrent model's memory: a
    rewind to a non-empty prefix raises NeedsRestore, as LlamaRuntime.rewind does there."""

    def __init__(self, script: Script, *, n_ctx: int = 4096, partial_rewind: bool = True) -> None:
        self.script = script
        self.n_ctx = n_ctx
        self.n_vocab = VOCAB
        self.partial_rewind = partial_rewind
        self.tokens_decoded = 0
        self.decoded: list[str] = []  # the text of every unit decoded, in order
        self.restores = 0
        self.snapshots = 0
        self._units: list[Unit] = []

    def tokenize(self, text: str, *, add_bos: bool = False) -> Unit:
        return encode(unmark(text), add_bos=add_bos)  # no control vocabulary: caller text is plain text here

    def has_control_string(self, text: str) -> bool:
        return False

    def eos_token(self) -> int:
        return BOS

    @property
    def units(self) -> list[Unit]:
        return list(self._units)

    def eval_units(self, units: Sequence[Unit], deadline: object = None) -> npt.NDArray[np.float32]:
        keep = 0
        while keep < len(units) - 1 and keep < len(self._units) and self._units[keep] == units[keep]:
            keep += 1
        if keep < len(self._units):
            if keep > 0 and not self.partial_rewind:
                raise NeedsRestore(keep)
            del self._units[keep:]
        for unit in units[keep:]:
            if sum(len(u) for u in self._units) + len(unit) > self.n_ctx:
                raise AssertionError("the engine let a request overflow the context")
            self._units.append(unit)
            self.tokens_decoded += len(unit)
            self.decoded.append(decode(unit))
        return self._logits(decode(units[-1]))

    def _logits(self, text: str) -> npt.NDArray[np.float32]:
        logits = np.full(VOCAB, OTHER_LOGIT, dtype=np.float32)
        for piece, value in (self.script(text) or {}).items():
            (token,) = (BOS,) if piece == END else encode(piece)
            logits[token] = value
        return logits

    def forget(self) -> None:
        self._units.clear()

    def snapshot(self) -> bytes:
        self.snapshots += 1
        return json.dumps(self._units).encode()

    def restore(self, units: Sequence[Unit], data: bytes) -> None:
        if [tuple(u) for u in json.loads(data)] != list(units):
            raise AssertionError("a snapshot was restored under other units than it was taken of")
        self.restores += 1
        self._units = list(units)


def labelled_options(text: str) -> dict[str, str]:
    """The options block the generic prompt shows in a suffix: label -> option text ("A. Billing")."""
    out = {}
    for line in text.splitlines():
        label, dot, rest = line.partition(". ")
        if dot and len(label) == 1 and label.isupper():
            out[label] = rest
    return out


def slot_reader(content: Mapping[str, float], slot_bias: Sequence[float] = ()) -> Script:
    """A reader like a biased model: the logit of label X is its option's content score (by option text) plus
    the bias of X's slot; nothing for a unit that shows no options (a header or a state)."""

    def script(text: str) -> dict[str, float] | None:
        shown = labelled_options(text)
        if not shown:
            return None
        return {
            f" {label}": content[option] + (slot_bias[slot] if slot < len(slot_bias) else 0.0)
            for slot, (label, option) in enumerate(shown.items())
        }

    return script
