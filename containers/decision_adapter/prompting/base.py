"""What every prompt scheme shares: the scheme interface the engine and the service read, label tokens and how
passes combine (the Jinja sandbox model templates render in is sandbox.py)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
from decision_spec.contract import SINGLE_LABEL_MAX
from decision_spec.gguf_metadata import Temperatures
from decision_spec.schemas import AnyQuestion, Option, Text

from .sandbox import Tokenize

Code = tuple[str, ...]  # a label as pieces that are each one token: ("B",) or the two-letter ("A", "C")
LETTERS = string.ascii_uppercase


# The option an out-of-scope question adds after its declared ones (decision-api.md's explicit way out).
OUT_OF_SCOPE = Option("x_out_of_scope", "None of these / not enough information", None, name="None of these")


def labels(n: int) -> list[Code]:
    """Slot labels for n options: 'A'..'Z' up to 26; beyond, two-letter codes 'AA'..'JU' (group letter,
    member letter), scored by the chain rule P(code) = P(group letter) * P(member letter | group letter)."""
    if n <= SINGLE_LABEL_MAX:
        return [(LETTERS[i],) for i in range(n)]
    return [(LETTERS[i // SINGLE_LABEL_MAX], LETTERS[i % SINGLE_LABEL_MAX]) for i in range(n)]


def single_token(tokenize: Tokenize, tail: str, piece: str) -> int | None:
    """The one token the model reads for `piece` right after `tail`; None where it is not one token."""
    base = list(tokenize(tail))
    toks = list(tokenize(tail + piece))
    if toks[: len(base)] != base or len(toks) != len(base) + 1:
        return None
    return toks[-1]


def leading_single_tokens(tokenize: Tokenize, tail: str, codes: Sequence[str]) -> int:
    """How many of `codes`, from the first, are each one token right after `tail`."""
    for i, code in enumerate(codes):
        if single_token(tokenize, tail, code) is None:
            return i
    return len(codes)


@dataclass(frozen=True)
class PassSpec:
    """One reading of a question: the text after the prefix, and which option sits in which slot."""

    suffix_text: str
    order: list[int]  # order[slot] = index of the option shown in that slot
    codes: list[Code]  # codes[slot] = the label the model answers with for that slot
    head_text: str = ""  # text before suffix_text shared by all passes of the question (read once)
    named: bool = False  # codes are option names, one piece each, scored token by token (core/cloze.py)


class PromptScheme(Protocol):
    """How a model is asked. The engine is the same for every scheme; a scheme says what text is shared
    per state (the prefix), what each question adds per option order (the passes), which labels name the
    options and how passes combine."""

    name: str  # reported in run identity
    version: str  # part of the state-cache key: a changed prompt never reuses old states
    tail: str  # text right before the answer, to find each label's token
    label_sep: str  # text between the tail and a label
    add_bos: bool
    supports_out_of_scope: bool  # can offer OUT_OF_SCOPE after the declared options (its own prompt allows it)

    adaptive_tolerance: float | None  # adaptive rotations: stop reading within this tolerance (adaptive.py); else None

    @property
    def order_debias(self) -> bool:
        """Whether questions are read in more than one option order (run identity says)."""

    @property
    def declared_temperatures(self) -> Temperatures | None:
        """The temperatures the GGUF declares; None where the scheme declares none."""

    def prefix_texts(self, state: Text) -> list[str]: ...

    def passes(
        self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text, out_of_scope: bool = False
    ) -> list[PassSpec]:
        """The readings of a question; with `out_of_scope`, `options` ends with OUT_OF_SCOPE, kept in the last slot."""

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]: ...


Combination = Literal["logmean", "mean"]


def combine_passes(logprobs: list[npt.NDArray[np.float64]], how: Combination) -> npt.NDArray[np.float64]:
    """Per-option log-scores from each pass's log-probabilities: the mean of logs (a product of experts)
    or the log of the mean of probabilities (llama.cpp's `lev`)."""
    stacked = np.stack(logprobs)
    if how == "logmean" or len(logprobs) == 1:
        return np.asarray(stacked.mean(axis=0), dtype=np.float64)
    return np.asarray(np.log(np.exp(stacked).mean(axis=0)), dtype=np.float64)
