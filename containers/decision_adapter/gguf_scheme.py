"""Decision-tuned GGUFs asked the way their authors trained them: the GGUF's own systemone template
(systemone_template.py), label scheme and temperatures (gguf_metadata.py), as llama.cpp's
tools/server/server-decision.cpp (b11434) asks them.

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
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from .contract import MAX_CHOICE_OPTIONS
from .gguf_metadata import TEMPLATE_KEY, InvalidDecisionMetadata, Temperatures, read_decision_metadata
from .prompt import AnyQuestion, Option, labels
from .schemas import ChoiceQuestion, NoulQuestion, Text
from .scheme import Code, PassSpec, PromptScheme, combine_passes
from .settings import AdapterSettings
from .systemone_template import QuestionView, SystemOneTemplate, Tokenize

log = logging.getLogger("decision_adapter.gguf_scheme")

OPENJEV_LABELS = string.ascii_uppercase + string.ascii_lowercase
LEV_CODES = [*string.ascii_uppercase, *(a + b for a in string.ascii_uppercase for b in string.ascii_uppercase)][
    :MAX_CHOICE_OPTIONS
]


def template_options(question: AnyQuestion) -> list[dict[str, Any]]:
    """The options as the template sees them: keys as the answer names them, descriptions as sent."""
    if isinstance(question, NoulQuestion):
        crit = question.criteria
        return [
            {"key": "true", "description": crit.true if crit else None},
            {"key": "false", "description": crit.false if crit else None},
        ]
    if isinstance(question, ChoiceQuestion):
        return [{"key": name, "description": desc} for name, desc in question.criteria.items()]
    return [{"key": str(i), "description": level} for i, level in enumerate(question.criteria)]


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

    def __init__(self, template: SystemOneTemplate, temperatures: Temperatures, *, single_labels: int) -> None:
        self.template = template
        self.temperatures = temperatures
        self.single_labels = single_labels  # how many leading codes are one token each for this model
        self.name = f"{self.kind}/gguf-systemone"
        self.version = f"{self.kind}-systemone-{template.sha256[:16]}"  # cached states never cross templates
        self.tail = template.tail
        self.add_bos = template.add_bos

    def prefix_texts(self, state: Text) -> list[str]:
        return list(self.template.split(state).texts)

    def temperature(self, qtype: str, n_options: int) -> float:
        return self.temperatures.of(qtype, n_options)

    def describe_temperatures(self) -> dict[str, float]:
        return self.temperatures.describe()

    def _pass(
        self,
        question: AnyQuestion,
        *,
        qid: str,
        state: Text,
        raw: list[dict[str, Any]],
        order: list[int],
        codes: list[Code],
    ) -> PassSpec:
        view = QuestionView(
            qid, question.type, question.instructions, [raw[i] for i in order], ["".join(c) for c in codes]
        )
        return PassSpec(self.template.suffix(state, view), order, codes)


class OpenJevScheme(_SystemOneScheme):
    kind = "openjev"
    order_debias = False

    def passes(self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text) -> list[PassSpec]:
        raw = template_options(question)
        chunks = anchored_chunks(len(raw), self.single_labels)
        return [
            self._pass(
                question,
                qid=qid,
                state=state,
                raw=raw,
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

    def passes(self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text) -> list[PassSpec]:
        raw = template_options(question)
        n = len(raw)
        # One piece per code where every code of the question is one token; else two letters for all.
        codes: list[Code] = [(c,) for c in LEV_CODES[:n]] if n <= self.single_labels else labels(n)
        orders = [list(range(n))]
        if isinstance(question, ChoiceQuestion):
            orders.append(list(reversed(range(n))))
        return [self._pass(question, qid=qid, state=state, raw=raw, order=order, codes=codes) for order in orders]

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        return combine_passes(logprobs, "mean")


def leading_single_tokens(tail: str, codes: Sequence[str], tokenize: Tokenize) -> int:
    """How many of `codes`, from the first, are each one token right after `tail`."""
    base = list(tokenize(tail))
    for i, code in enumerate(codes):
        toks = list(tokenize(tail + code))
        if toks[: len(base)] != base or len(toks) != len(base) + 1:
            return i
    return len(codes)


def scheme_from_metadata(
    meta: dict[str, str], *, bos_text: str, eos_text: str, settings: AdapterSettings, tokenize: Tokenize
) -> PromptScheme | None:
    """The scheme the GGUF declares; None when it declares none. Raises a DecisionMetadataError (a
    ValueError) naming the key for a scheme that is not served or metadata that cannot be used.
    `tokenize` is the model's (special tokens parsed, no BOS): labels must be single tokens, and the
    prefix is cut where tokenization does not change."""
    decision = read_decision_metadata(meta)
    if decision is None:
        return None
    template = SystemOneTemplate(
        decision.template,
        bos_text=bos_text,
        eos_text=eos_text,
        add_bos=meta.get("tokenizer.ggml.add_bos_token", "true") != "false",
        tokenize=tokenize,
        with_labels=decision.type == "lev",
        cache_size=2 * settings.max_concurrency,
    )
    codes = OPENJEV_LABELS if decision.type == "openjev" else LEV_CODES
    single = leading_single_tokens(template.tail, codes, tokenize)
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
                "temperature": scheme.describe_temperatures(),
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
