"""What the model reads: the generic decision prompt, split into units that can be evaluated once
and reused (header, state, question suffix).

The model's own chat template (from the GGUF) is rendered with two markers in the user turn, so
the text around the state and the question is exactly what that template produces; the markers
split it into the header (system turn and the start of the user turn), the state, and the
question suffix that ends where the assistant's first token would be. The question id is never
shown to the model, and one question's suffix never mentions another question.
"""

from __future__ import annotations

import json
import logging
import string
from dataclasses import dataclass
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

from .schemas import ChoiceQuestion, NoulQuestion, ScoreQuestion, Text

log = logging.getLogger("decision_adapter.prompt")
TEMPLATE_VERSION = "generic-v2"
SYSTEM_PROMPT = (
    "You are a careful decision assistant. Read the state, then answer the question by choosing exactly one "
    "of the labelled options. Reply with the option's label only."
)
LETTERS = string.ascii_uppercase
SINGLE_LABEL_MAX = len(LETTERS)  # up to 26 options: one letter each; beyond, two-letter codes (see labels())
_M1, _M2 = "\u2063\u2063STATE\u2063\u2063", "\u2063\u2063QUESTION\u2063\u2063"

AnyQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion


def render_text(value: Text | None) -> str:
    """Strings as they are; objects and arrays as compact JSON (structured text is model input too)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@dataclass(frozen=True)
class Option:
    """One declared option: `key` is how the answer names it, `text` how the prompt shows it."""

    key: str
    text: str


def options_of(question: AnyQuestion) -> list[Option]:
    if isinstance(question, NoulQuestion):
        crit = question.criteria
        yes = render_text(crit.true) if crit else ""
        no = render_text(crit.false) if crit else ""
        return [Option("true", f"Yes: {yes}" if yes else "Yes"), Option("false", f"No: {no}" if no else "No")]
    if isinstance(question, ChoiceQuestion):
        return [
            Option(name, f"{name}: {render_text(desc)}" if desc is not None else name)
            for name, desc in question.criteria.items()
        ]
    return [Option(str(i), render_text(level)) for i, level in enumerate(question.criteria)]


def labels(n: int) -> list[tuple[str, ...]]:
    """Slot labels for n options: 'A'..'Z' up to 26; beyond, two-letter codes 'AA'..'JU' (group letter,
    member letter), scored by the chain rule P(code) = P(group letter) * P(member letter | group letter)."""
    if n <= SINGLE_LABEL_MAX:
        return [(LETTERS[i],) for i in range(n)]
    return [(LETTERS[i // SINGLE_LABEL_MAX], LETTERS[i % SINGLE_LABEL_MAX]) for i in range(n)]


def question_head(question: AnyQuestion) -> str:
    """The part of a question that does not depend on the option order: read once, shared by its passes."""
    instructions = render_text(question.instructions)
    default = "Which answer fits the state?" if isinstance(question, NoulQuestion) else "Which option fits best?"
    return f"Question: {instructions or default}\n"


def options_block(question: AnyQuestion, order: list[int], options: list[Option]) -> str:
    """The labelled options for one order (order[slot] = index of the option shown in that slot)."""
    codes = ["".join(code) for code in labels(len(order))]
    if isinstance(question, ScoreQuestion):
        low, high = codes[order.index(0)], codes[order.index(len(order) - 1)]
        lines = [f"Levels ({low} is the lowest, {high} the highest):"]
    else:
        lines = ["Options:"]
    lines += [f"{codes[slot]}. {options[idx].text}" for slot, idx in enumerate(order)]
    return "\n".join(lines)


def question_text(question: AnyQuestion, order: list[int], options: list[Option]) -> str:
    """The whole question as the model reads it after the state (head, then options)."""
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

    def state_part(self, state: Text) -> str:
        return f"{self.state_lead}{render_text(state)}"

    def suffix(self, body: str) -> str:
        return f"{self.between}{body}{self.tail}"

    def question_parts(self, question: AnyQuestion, order: list[int], options: list[Option]) -> tuple[str, str]:
        """(head, pass text): the head is shared by every order of one question, the rest is per order."""
        return f"{self.between}{question_head(question)}", f"{options_block(question, order, options)}{self.tail}"


def build_template(chat_template: str | None, *, bos_text: str, eos_text: str, add_bos: bool) -> PromptTemplate:
    if chat_template:
        try:
            return _from_chat_template(chat_template, bos_text=bos_text, eos_text=eos_text, add_bos=add_bos)
        except Exception as e:
            event = {"event": "chat_template_unusable", "fallback": "plain", "reason": type(e).__name__}
            log.warning(json.dumps(event))
    return PromptTemplate(
        header=f"{SYSTEM_PROMPT}\n\n",
        state_lead="State:\n",
        between="\n\n",
        tail="\nAnswer:",
        label_sep=" ",
        add_bos=add_bos,
        source="plain",
    )


def _from_chat_template(chat_template: str, *, bos_text: str, eos_text: str, add_bos: bool) -> PromptTemplate:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env.globals["raise_exception"] = raise_exception
    content = f"{_M1}State:\n{_M1}{_M2}{_M2}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": content},
    ]
    text = env.from_string(chat_template).render(
        messages=messages, add_generation_prompt=True, bos_token=bos_text, eos_token=eos_text
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
    )
