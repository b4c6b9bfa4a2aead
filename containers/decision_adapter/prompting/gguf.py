"""The GGUF-declared schemes (openjev, lev): decision-tuned models asked the way their authors trained them.

The GGUF's own systemone template (systemone.py), label scheme and temperatures (gguf_metadata.py),
as llama.cpp's tools/server/server-decision.cpp asks them.

openjev: labels A-Z then a-z, one per option, one order, a softmax over the label tokens' logits.
Past 52 options (where llama.cpp answers 400) the question is asked in chunks of at most 52 that
all start with the first option, and each option's score is its log-odds against that anchor (see
`anchored_chunks`): every option is asked, none is dropped.
lev: codes A..Z then AA.. (the template gets them as `label`) while every code of the question is
one token for the model; otherwise two-letter codes AA, AB, .. for the whole question, scored by the
chain rule. Choice questions are asked in the given and the reversed order and the two
distributions averaged; noul and score in the given order.
Noul options are `true` then `false`, score options are keyed "0".."n-1"; descriptions are the
request's criteria as sent (null where absent). Temperatures apply to the combined score.
"""

from __future__ import annotations

import json
import logging
import math
import string
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from decision_spec.contract import MAX_CHOICE_OPTIONS
from decision_spec.gguf_metadata import TEMPLATE_KEY, DecisionMetadata, InvalidDecisionMetadata, Temperatures
from decision_spec.schemas import AnyQuestion, ChoiceQuestion, Option, Text

from .base import Code, PassSpec, PromptScheme, combine_passes, labels, leading_single_tokens
from .sandbox import Tokenize
from .systemone import QuestionView, SystemOneTemplate

log = logging.getLogger("decision_adapter.prompting")

OPENJEV_LABELS = string.ascii_uppercase + string.ascii_lowercase
LEV_CODES = [*string.ascii_uppercase, *(a + b for a in string.ascii_uppercase for b in string.ascii_uppercase)][
    :MAX_CHOICE_OPTIONS
]


def anchored_chunks(n: int, size: int) -> list[list[int]]:
    """Options split into chunks of at most `size`, each led by option 0 (the anchor): one chunk when
    all fit. Within a chunk p(i) / p(anchor) = exp(logit_i - logit_anchor), so the log-odds against the
    anchor put every chunk on one scale (Luce's choice axiom); a softmax over them is the answer."""
    if n <= size:
        return [list(range(n))]
    groups = math.ceil((n - 1) / (size - 1))
    bounds = [1 + (n - 1) * g // groups for g in range(groups + 1)]
    return [[0, *range(bounds[g], bounds[g + 1])] for g in range(groups)]


def combine_anchored(logprobs: list[npt.NDArray[np.float64]], chunks: list[list[int]]) -> npt.NDArray[np.float64]:
    """Each pass holds its own chunk's slots only; the rest of its vector is never read."""
    out = np.zeros(len(logprobs[0]), dtype=np.float64)
    for lp, chunk in zip(logprobs, chunks, strict=True):
        out[chunk[1:]] = lp[chunk[1:]] - lp[chunk[0]]
    return out


class _SystemOneScheme:
    kind: ClassVar[str]
    order_debias: ClassVar[bool]
    label_sep = ""
    adaptive_tolerance: float | None = None  # the GGUF's own passes are all read
    supports_out_of_scope = False  # the GGUF's own template and labels: no option is added to them

    def __init__(self, template: SystemOneTemplate, temperatures: Temperatures, *, single_labels: int) -> None:
        self.template = template
        self.declared_temperatures = temperatures
        self.single_labels = single_labels  # how many leading codes are one token each for this model
        self.name = f"{self.kind}/gguf-systemone"
        self.version = f"{self.kind}-systemone-{template.sha256[:16]}"  # cached states never cross templates
        self.tail = template.tail
        self.add_bos = template.add_bos

    def prefix_texts(self, state: Text) -> list[str]:
        return list(self.template.split(state).texts)

    def _pass(
        self,
        question: AnyQuestion,
        *,
        qid: str,
        state: Text,
        options: list[Option],
        order: list[int],
        codes: list[Code],
    ) -> PassSpec:
        shown = [{"key": options[i].key, "description": options[i].description} for i in order]
        view = QuestionView(qid, question.type, question.instructions, shown, ["".join(c) for c in codes])
        return PassSpec(self.template.suffix(state, view), order, codes)


class OpenJevScheme(_SystemOneScheme):
    kind = "openjev"
    order_debias = False

    def passes(
        self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text, out_of_scope: bool = False
    ) -> list[PassSpec]:
        chunks = anchored_chunks(len(options), self.single_labels)
        return [
            self._pass(
                question,
                qid=qid,
                state=state,
                options=options,
                order=chunk,
                codes=[(OPENJEV_LABELS[j],) for j in range(len(chunk))],
            )
            for chunk in chunks
        ]

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        if len(logprobs) == 1:
            return logprobs[0]
        return combine_anchored(logprobs, anchored_chunks(len(logprobs[0]), self.single_labels))


class LevScheme(_SystemOneScheme):
    kind = "lev"
    order_debias = True

    def passes(
        self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text, out_of_scope: bool = False
    ) -> list[PassSpec]:
        n = len(options)
        # One piece per code where every code of the question is one token; else two letters for all.
        codes: list[Code] = [(c,) for c in LEV_CODES[:n]] if n <= self.single_labels else labels(n)
        orders = [list(range(n))]
        if isinstance(question, ChoiceQuestion):
            orders.append(list(reversed(range(n))))
        return [
            self._pass(question, qid=qid, state=state, options=options, order=order, codes=codes) for order in orders
        ]

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        return combine_passes(logprobs, "mean")


def declared_scheme(
    decision: DecisionMetadata, *, bos_text: str, eos_text: str, add_bos: bool, tokenize: Tokenize, cache_size: int
) -> PromptScheme:
    """The scheme the GGUF declares. Raises InvalidDecisionMetadata naming the key where its template or
    labels cannot be used: labels must be single tokens, and the prefix is cut where tokenization does
    not change. `cache_size`: how many states' prefix splits the template keeps."""
    template = SystemOneTemplate(
        decision.template,
        bos_text=bos_text,
        eos_text=eos_text,
        add_bos=add_bos,
        tokenize=tokenize,
        with_labels=decision.type == "lev",
        cache_size=cache_size,
    )
    codes = OPENJEV_LABELS if decision.type == "openjev" else LEV_CODES
    single = leading_single_tokens(tokenize, template.tail, codes)
    needed = 2 if decision.type == "openjev" else len(string.ascii_uppercase)
    if single < needed:
        raise InvalidDecisionMetadata(
            f"{decision.type} labels {list(codes[:needed])} must each be one token after the template's last "
            f"line {template.tail!r}; {codes[single]!r} is not for this model"
        )
    scheme_class = OpenJevScheme if decision.type == "openjev" else LevScheme
    scheme = scheme_class(template, decision.temperatures, single_labels=single)
    log.info(
        json.dumps(
            {
                "event": "decision_scheme",
                "scheme": scheme.name,
                "template_sha256": template.sha256,
                "single_token_labels": single,
                "state_shared": template.shares_state,
                "temperature": decision.temperatures.describe(),
            }
        )
    )
    if not template.shares_state:
        log.warning(
            json.dumps(
                {
                    "event": "state_not_shared",
                    "message": f"{TEMPLATE_KEY} shows question-specific text before the state; each question "
                    "evaluates the state again",
                }
            )
        )
    return scheme
