"""What one request may ask of a worker, checked before the work it limits: questions per request, options per
question, and the tokens its caller text needs at the least, counted from characters before anything is marked or
tokenized.

A token of a BPE or SentencePiece vocabulary reads at most as many characters as its own text holds, so a token
that reads character c reads at most reach[c] characters, the longest token text holding c (measured from the GGUF
at start, `TokenFloor`). Each character of a text then accounts for at least 1/reach[c] of a token, and the text
is at least the sum of those tokens. A request whose state and largest question cannot fit the context on that
count, or whose text cannot fit the per-request token budget, is refused at once, naming the limit; one that
passes is tokenized (linear, caller_text.py) and checked exactly by the engine.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from decision_spec.schemas import ChoiceQuestion, render_text

from .asked import Asked
from .core.caller_text import caller_strings
from .core.errors import RequestLimitExceeded, TokenBudgetExceeded, UnencodableText, request_budget_exceeded
from .slicing import stable_pieces

MAX_NESTING = 64  # objects and arrays in a state or a question's text, nested: deeper reads as noise, not a decision


def caller_text_of(value: Any) -> str:
    """Every character of a value a prompt renders, joined: what its tokens are counted from. Its strings (those
    `caller_text.mark` marks, object keys included), and its numbers and booleans as JSON writes them: a state of
    zeros is text too. Not null (a missing description renders as nothing) nor JSON's punctuation (a template may
    render an object another way)."""
    return "".join(caller_strings(value, scalars=True))


def state_text(state: Any) -> str:
    """The state's text as the generic prompt renders it (an object or array as JSON: every key, string, number,
    boolean and the punctuation between them), what its tokens are counted from. One C call, not a walk."""
    return render_text(state)


def state_key(state: Any) -> str:
    """A state's identity within a body: records with the same key share one evaluation of their state."""
    return json.dumps(state, ensure_ascii=False)


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(text: str) -> None:
    """Refuse text that has no UTF-8 form (a lone UTF-16 surrogate, which JSON's `\\ud800` escape can carry):
    nothing can tokenize it."""
    for piece in stable_pieces(text):
        found = _SURROGATE.search(piece)
        if found:
            raise UnencodableText(
                f"the request's text holds a lone UTF-16 surrogate (U+{ord(found.group()):04X}), which is not text: "
                "send characters, or a surrogate pair's character as one escape pair"
            )


@dataclass(frozen=True)
class TokenFloor:
    """The fewest tokens a text can be for one vocabulary."""

    reach: Mapping[str, int]  # an ASCII character -> the most characters a token that reads it reads
    longest: int  # the most any token reads: every other character's reach
    dropped: frozenset[str] = frozenset()  # ASCII characters no token reads: the tokenizer drops them

    def tokens(self, text: str) -> int:
        """The fewest tokens: an ASCII character no token reads counts nothing (the vocabulary drops it: SmolLM2's
        0x04, and the model never sees it), any other at least 1/reach. Counted a slice at a time."""
        ascii_counts = np.zeros(128, dtype=np.int64)
        other = 0
        for piece in stable_pieces(text):  # code points counted in C, a slice at a time
            points = np.frombuffer(piece.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            low = points[points < 128]
            ascii_counts += np.bincount(low, minlength=128)
            other += len(points) - len(low)
        share = other / self.longest
        for code in np.flatnonzero(ascii_counts):
            c = chr(code)
            if c not in self.dropped:
                share += int(ascii_counts[code]) / self.reach.get(c, self.longest)
        return max(0, math.ceil(share - 1e-6))


@dataclass(frozen=True)
class RequestLimits:
    n_ctx: int  # the context, in tokens, one question reads (its state included)
    max_request_tokens: int  # the tokens one request may have evaluated, every question and order together
    floor: TokenFloor | None  # None: no bound known for this vocabulary (nothing is refused before tokenizing)
    max_questions: int
    max_options: int
    max_body_tokens: int | None = None  # a JSON Lines body's text, each distinct state once (None: no limit)

    def least_tokens(self, text: str) -> int:
        """The fewest tokens the text can be (0 where the vocabulary gives no bound)."""
        return self.floor.tokens(text) if self.floor is not None else 0

    def check(self, request: Asked) -> None:
        """Every limit a decision request is held to before any work: its counts, then its text (as its walk
        collected it, asked.py)."""
        questions = request.questions
        self.check_counts(
            len(questions), (len(q.criteria) for q in questions.values() if isinstance(q, ChoiceQuestion))
        )
        if request.depth > MAX_NESTING:
            raise RequestLimitExceeded(
                f"the request's text nests objects and arrays {request.depth} levels deep; this endpoint reads at "
                f"most {MAX_NESTING}"
            )
        state = state_text(request.state)
        asked = list(request.texts.values())
        for text in (state, *asked):
            check_encodable(text)
        self.check_text(state, asked)

    def check_counts(self, questions: int, options: Iterable[int]) -> None:
        if questions > self.max_questions:
            raise RequestLimitExceeded(
                f"the request has {questions} questions; this endpoint answers at most {self.max_questions} per "
                "request (DECISION_MAX_QUESTIONS): split the request"
            )
        most = max(options, default=0)
        if most > self.max_options:
            raise RequestLimitExceeded(
                f"a question has {most} options; this endpoint reads at most {self.max_options} per question "
                "(DECISION_MAX_OPTIONS)"
            )

    def check_text(self, state: str, questions: list[str]) -> None:
        """Refuse, from the caller text alone, a request that cannot fit: the state and its largest question in the
        context, or all of its text in the request's token budget."""
        if self.floor is None:
            return
        state_tokens = self.least_tokens(state)
        each = [self.least_tokens(q) for q in questions]
        one = state_tokens + max(each, default=0)
        if one > self.n_ctx:
            largest = len(questions[each.index(max(each))]) if each else 0
            raise TokenBudgetExceeded(
                f"the state and a question hold {len(state) + largest} characters of "
                f"text, at least {one} tokens for this model, but the model's budget is {self.n_ctx} tokens "
                "(SM_LLAMA_CPP_CTX_SIZE); shorten the state or the options, or split the request"
            )
        total = state_tokens + sum(each)
        if total > self.max_request_tokens:
            raise request_budget_exceeded(f"at least {total}", self.max_request_tokens)

    def check_body(self, requests: Sequence[Asked]) -> None:
        """A JSON Lines body's text, at the least, within DECISION_MAX_BODY_TOKENS (each distinct state once: a state
        shared by records is evaluated once); refused whole before any record is, naming the limit."""
        if self.floor is None or self.max_body_tokens is None:
            return
        total, states = 0, set()
        for request in requests:
            key = state_key(request.state)
            if key not in states:
                states.add(key)
                total += self.least_tokens(state_text(request.state))
            total += sum(self.least_tokens(text) for text in request.texts.values())
        if total > self.max_body_tokens:
            raise TokenBudgetExceeded(
                f"the body's {len(requests)} records hold at least {total} tokens of text for this model, each "
                f"distinct state once; one body may hold at most {self.max_body_tokens} (DECISION_MAX_BODY_TOKENS): "
                "split the body"
            )

    def check_chat(self, text: str) -> None:
        check_encodable(text)
        least = self.least_tokens(text)
        if least > self.n_ctx:
            raise TokenBudgetExceeded(
                f"the messages hold {len(text)} characters, at least {least} tokens for this model, over the "
                f"context budget of {self.n_ctx} tokens (SM_LLAMA_CPP_CTX_SIZE)"
            )
