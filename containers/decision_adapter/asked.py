"""A decision as the engine reads it, whichever dialect asked (System One's body, a JSON Lines record, OpenAI's body
parsed by openai_decisions.py): the model, the state and the questions by id, their caller text walked once
(core/caller_text.walk) for the limits (its depth and text), the prompt (marked) and the input flags (its strings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decision_spec.schemas import AnyQuestion, DecisionRequest, Text

from .core.caller_text import mark, walk


@dataclass(frozen=True)
class Asked:
    model: str
    state: Text
    questions: dict[str, AnyQuestion]  # in the request's order
    shown_state: Any  # the state with every caller string marked: what a prompt scheme renders
    state_strings: tuple[str, ...]  # the state's strings, object keys included, in document order: what flags read
    depth: int  # objects and arrays nested, the deepest of the state's and the questions'
    shown: dict[str, AnyQuestion]  # each question marked
    shown_ids: dict[str, str]  # each question's id marked (a scheme may show it)
    texts: dict[str, str]  # each question's id and caller text (numbers and booleans too): its tokens' floor
    strings: dict[str, tuple[str, ...]]  # each question's caller strings: what the control-string flag reads


def asked(model: str, state: Text, questions: dict[str, AnyQuestion]) -> Asked:
    """The decision, its state and each question walked once (linear in the text, however deep it nests)."""
    state_walk = walk(state)
    walks = {qid: walk(q) for qid, q in questions.items()}
    return Asked(
        model=model,
        state=state,
        questions=questions,
        shown_state=state_walk.marked,
        state_strings=state_walk.strings,
        depth=max(state_walk.depth, *(w.depth for w in walks.values())),
        shown={qid: w.marked for qid, w in walks.items()},
        shown_ids={qid: mark(qid) for qid in questions},
        texts={qid: qid + w.text for qid, w in walks.items()},
        strings={qid: w.strings for qid, w in walks.items()},
    )


def asked_of(request: DecisionRequest) -> Asked:
    """A System One request (/v1/systemone, /invocations, a JSON Lines record) as the engine reads it."""
    return asked(request.model, request.state, request.questions)
