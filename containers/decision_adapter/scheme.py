"""Prompt schemes: how a model is asked. The engine is the same for every scheme; a scheme says
what text is shared per state (the prefix), what each question adds per option order (the passes),
which labels name the options, how passes combine, and which temperature applies.

`GenericScheme` is this project's own prompt for any instruction model. Decision-tuned GGUFs that
declare their own scheme in metadata get theirs (see gguf_scheme.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from .prompt import (
    SINGLE_LABEL_MAX,
    TEMPLATE_VERSION,
    AnyQuestion,
    Option,
    PromptTemplate,
    labels,
)
from .schemas import Text

Code = tuple[str, ...]  # a label as pieces that are each one token: ("B",) or the two-letter ("A", "C")


@dataclass(frozen=True)
class PassSpec:
    """One reading of a question: the text after the prefix, and which option sits in which slot."""

    suffix_text: str
    order: list[int]  # order[slot] = index of the option shown in that slot
    codes: list[Code]  # codes[slot] = the label the model answers with for that slot
    head_text: str = ""  # text before suffix_text shared by all passes of the question (read once)


class PromptScheme(Protocol):
    name: str  # reported in run identity
    version: str  # part of the state-cache key: a changed prompt never reuses old states
    tail: str  # text right before the answer, to find each label's token
    label_sep: str  # text between the tail and a label
    add_bos: bool

    def prefix_texts(self, state: Text) -> list[str]: ...

    def passes(self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text) -> list[PassSpec]: ...

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]: ...

    def temperature(self, qtype: str, n_options: int) -> float: ...


Combination = Literal["logmean", "mean"]


def combine_passes(logprobs: list[npt.NDArray[np.float64]], how: Combination) -> npt.NDArray[np.float64]:
    """Per-option log-scores from each pass's log-probabilities: the mean of logs (a product of experts)
    or the log of the mean of probabilities (llama.cpp's `lev`)."""
    stacked = np.stack(logprobs)
    if how == "logmean" or len(logprobs) == 1:
        return np.asarray(stacked.mean(axis=0), dtype=np.float64)
    return np.asarray(np.log(np.exp(stacked).mean(axis=0)), dtype=np.float64)


class GenericScheme:
    """This project's prompt, in the model's own chat template; labels A-Z, then two-letter codes."""

    def __init__(self, template: PromptTemplate, *, order_debias: bool, debias_max_options: int) -> None:
        self.template = template
        self.order_debias = order_debias
        self.debias_max_options = debias_max_options
        self.name = f"{TEMPLATE_VERSION}/{template.source}"
        self.version = TEMPLATE_VERSION
        self.tail = template.tail
        self.label_sep = template.label_sep
        self.add_bos = template.add_bos

    def prefix_texts(self, state: Text) -> list[str]:
        return [self.template.header, self.template.state_part(state)]

    def passes(self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text) -> list[PassSpec]:
        n = len(options)
        orders = [list(range(n))]
        if self.order_debias and n <= self.debias_max_options:
            orders.append(list(reversed(range(n))))
        codes = labels(n)
        specs = []
        for order in orders:
            head, rest = self.template.question_parts(question, order, options)
            specs.append(PassSpec(rest, order, codes, head_text=head))
        return specs

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        return combine_passes(logprobs, "logmean")

    def temperature(self, qtype: str, n_options: int) -> float:
        return 1.0


__all__ = ["SINGLE_LABEL_MAX", "Code", "GenericScheme", "PassSpec", "PromptScheme", "combine_passes"]
