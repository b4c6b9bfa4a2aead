"""The generic scheme: this project's own decision prompt for any instruction model, in the model's chat template.

The model's chat template (from the GGUF) is rendered with two markers in the user turn, so the
text around the state and the question is exactly what that template produces; the markers split it
into the header (system turn and the start of the user turn), the state, and the question suffix that
ends where the assistant's first token would be. The question id is never shown to the model, and one
question's suffix never mentions another question. Labels (DECISION_OPTION_LABELS): letters, A-Z, then
two-letter codes, one a slot; or names, the options listed by name and each scored as the answer, token by
token (core/cloze.py), for a model that binds letters to options poorly (measure yours: on the decider it
moved accuracy by a few points, BENCHMARKS.md).

Orders (DECISION_ORDER_DEBIAS): the given one (off), the given and the reversed (reverse), every
cyclic rotation (rotations), so each option is read in each slot once, or those rotations read one by
one until the rest cannot change the answer beyond a tolerance (adaptive, see adaptive.py). An
out-of-scope question's added option stays in the last slot in every order: the declared options move
around it. off and reverse combine orders by the mean of log-probabilities (a product of experts);
rotations and adaptive by the mean of probabilities, because only an average of distributions bounds
what the unread orders can still do (a log-probability has no lower bound), and the two modes must give
the same answer where adaptive reads every rotation.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from decision_spec.contract import DebiasMode, OptionLabels, StateBoundary
from decision_spec.question_types import kind_of
from decision_spec.schemas import AnyQuestion, Option, Text, render_text

from ..core.signals import option_orders
from .base import OUT_OF_SCOPE, PassSpec, combine_passes, labels
from .boundary import state_block, system_line
from .sandbox import sandbox

log = logging.getLogger("decision_adapter.prompting")
TEMPLATE_VERSION = "generic-v2"
SYSTEM_PROMPT = (
    "You are a careful decision assistant. Read the state, then answer the question by choosing exactly one "
    "of the labelled options. Reply with the option's label only."
)
# Where options are named, the system prompt asks for the name (the one sentence that differs).
SYSTEM_PROMPT_NAMES = (
    "You are a careful decision assistant. Read the state, then answer the question by choosing exactly one "
    "of the listed options. Reply with the option's name only."
)
_M1, _M2 = "\u2063\u2063STATE\u2063\u2063", "\u2063\u2063QUESTION\u2063\u2063"


def question_head(question: AnyQuestion) -> str:
    """The part of a question that does not depend on the option order: read once, shared by its passes."""
    instructions = render_text(question.instructions)
    return f"Question: {instructions or kind_of(question.type).default_instructions}\n"


def options_block(question: AnyQuestion, order: list[int], options: list[Option], *, named: bool = False) -> str:
    """The options for one order (order[slot] = index of the option shown in that slot): each after its slot's
    letter, or, `named`, each on a line of its own, to be answered by name."""
    codes = [f'"{options[idx].answered_as}"' for idx in order] if named else ["".join(c) for c in labels(len(order))]
    if kind_of(question.type).levels:  # the extremes are levels, never an added out-of-scope option
        top = len(options) - 1 - (options[-1] == OUT_OF_SCOPE)
        low, high = codes[order.index(0)], codes[order.index(top)]
        lines = [f"Levels ({low} is the lowest, {high} the highest):"]
    else:
        lines = ["Options:"]
    if named:
        lines += [f"- {options[idx].text}" for idx in order]
    else:
        lines += [f"{codes[slot]}. {options[idx].text}" for slot, idx in enumerate(order)]
    return "\n".join(lines)


def question_text(question: AnyQuestion, order: list[int], options: list[Option]) -> str:
    """The whole question as the model reads it after the state (head, then lettered options)."""
    return question_head(question) + options_block(question, order, options)


@dataclass(frozen=True)
class PromptTemplate:
    """The model's chat template, rendered once with markers and split into reusable text pieces."""

    header: str  # everything before the state (system turn, start of the user turn)
    state_lead: str  # text between the header and the state itself
    between: str  # text between the state and the question
    tail: str  # text after the question, up to where the model's answer starts
    label_sep: str  # what precedes a label in the answer ("" in chat turns, " " after "Answer:")
    add_bos: bool
    source: str  # "gguf-chat-template" or "plain"
    boundary: StateBoundary = "off"
    option_labels: OptionLabels = "letters"

    def state_part(self, state: Text) -> str:
        return f"{self.state_lead}{state_block(render_text(state), self.boundary)}"

    def suffix(self, body: str) -> str:
        return f"{self.between}{body}{self.tail}"

    def question_parts(self, question: AnyQuestion, order: list[int], options: list[Option]) -> tuple[str, str]:
        """(head, pass text): the head is shared by every order of one question, the rest is per order."""
        block = options_block(question, order, options, named=self.option_labels == "names")
        return f"{self.between}{question_head(question)}", f"{block}{self.tail}"


def build_template(
    chat_template: str | None,
    *,
    bos_text: str,
    eos_text: str,
    add_bos: bool,
    boundary: StateBoundary = "off",
    option_labels: OptionLabels = "letters",
) -> PromptTemplate:
    """The prompt in the model's chat template; the plain prompt where there is none or it cannot be used."""
    system = (SYSTEM_PROMPT_NAMES if option_labels == "names" else SYSTEM_PROMPT) + system_line(boundary)
    if chat_template:
        try:
            return _from_chat_template(
                chat_template,
                bos_text=bos_text,
                eos_text=eos_text,
                add_bos=add_bos,
                system=system,
                boundary=boundary,
                option_labels=option_labels,
            )
        except Exception as e:
            event = {"event": "chat_template_unusable", "fallback": "plain", "reason": type(e).__name__}
            log.warning(json.dumps(event))
    return PromptTemplate(
        header=f"{system}\n\n",
        state_lead="State:\n",
        between="\n\n",
        tail="\nAnswer:",
        label_sep=" ",
        add_bos=add_bos,
        source="plain",
        boundary=boundary,
        option_labels=option_labels,
    )


def _from_chat_template(
    chat_template: str,
    *,
    bos_text: str,
    eos_text: str,
    add_bos: bool,
    system: str,
    boundary: StateBoundary,
    option_labels: OptionLabels,
) -> PromptTemplate:
    content = f"{_M1}State:\n{_M1}{_M2}{_M2}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": content},
    ]
    text = (
        sandbox()
        .from_string(chat_template)
        .render(messages=messages, add_generation_prompt=True, bos_token=bos_text, eos_token=eos_text)
    )
    if text.count(_M1) != 2 or text.count(_M2) != 2:
        raise ValueError("the chat template does not reproduce the user turn verbatim")
    header, lead, rest = text.split(_M1)
    _, tail = rest.split(_M2 + _M2)
    if add_bos and bos_text and header.startswith(bos_text):
        add_bos = False  # the template writes BOS itself; adding another would double it
    return PromptTemplate(
        header=header,
        state_lead=lead,
        between="\n\n",
        tail=tail,
        label_sep="",
        add_bos=add_bos,
        source="gguf-chat-template",
        boundary=boundary,
        option_labels=option_labels,
    )


class GenericScheme:
    """This project's prompt: the state once, then each question in the orders of the debiasing mode."""

    declared_temperatures = None  # calibration comes from the manifest, or none
    supports_out_of_scope = True

    def __init__(
        self,
        template: PromptTemplate,
        *,
        debias_mode: DebiasMode,
        debias_max_options: int,
        rotation_max_options: int,
        adaptive_tolerance: float | None = None,
    ) -> None:
        self.template = template
        self.debias_mode: DebiasMode = debias_mode
        self.order_debias = debias_mode != "off"
        self.adaptive_tolerance = adaptive_tolerance if debias_mode == "adaptive" else None
        self.debias_max_options = debias_max_options
        self.rotation_max_options = rotation_max_options
        named = template.option_labels == "names"
        self.name = f"{TEMPLATE_VERSION}/{template.source}" + ("/names" if named else "")
        self.version = TEMPLATE_VERSION + ("/names" if named else "")
        self.option_labels: OptionLabels = template.option_labels
        self.tail = template.tail
        self.label_sep = template.label_sep
        self.add_bos = template.add_bos

    def prefix_texts(self, state: Text) -> list[str]:
        return [self.template.header, self.template.state_part(state)]

    def passes(
        self, question: AnyQuestion, options: list[Option], *, qid: str, state: Text, out_of_scope: bool = False
    ) -> list[PassSpec]:
        declared = len(options) - 1 if out_of_scope else len(options)
        orders = option_orders(
            declared,
            self.debias_mode,
            debias_max_options=self.debias_max_options,
            rotation_max_options=self.rotation_max_options,
        )
        if out_of_scope:
            orders = [[*order, declared] for order in orders]
        named = self.option_labels == "names"
        codes = labels(len(options))
        specs = []
        for order in orders:
            head, rest = self.template.question_parts(question, order, options)
            if named:  # each slot answered by its option's name, scored token by token (core/cloze.py)
                codes = [(options[idx].answered_as,) for idx in order]
            specs.append(PassSpec(rest, order, codes, head_text=head, named=named))
        return specs

    def combine(self, logprobs: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        return combine_passes(logprobs, "mean" if self.debias_mode in ("rotations", "adaptive") else "logmean")
