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

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .caller_text import caller_strings
from .errors import RequestLimitExceeded, TokenBudgetExceeded, request_budget_exceeded
from .schemas import ChoiceQuestion, DecisionRequest


def caller_text_of(value: Any) -> str:
    """Every string `caller_text.mark` would mark in a value, joined: what its tokens are counted from."""
    return "".join(caller_strings(value))


@dataclass(frozen=True)
class TokenFloor:
    """The fewest tokens a text can be for one vocabulary."""

    reach: Mapping[str, int]  # an ASCII character -> the most characters a token that reads it reads
    longest: int  # the most any token reads: every other character's reach

    def tokens(self, text: str) -> int:
        share = sum(n / self.reach.get(c, self.longest) for c, n in Counter(text).items())
        return max(0, math.ceil(share - 1e-6))


@dataclass(frozen=True)
class RequestLimits:
    n_ctx: int  # the context, in tokens, one question reads (its state included)
    max_request_tokens: int  # the tokens one request may have evaluated, every question and order together
    floor: TokenFloor | None  # None: no bound known for this vocabulary (nothing is refused before tokenizing)
    max_questions: int
    max_options: int

    def least_tokens(self, text: str) -> int:
        """The fewest tokens the text can be (0 where the vocabulary gives no bound)."""
        return self.floor.tokens(text) if self.floor is not None else 0

    def check(self, request: DecisionRequest) -> None:
        """Every limit a decision request is held to before any work: its counts, then its text."""
        questions = request.questions
        self.check_counts(
            len(questions), (len(q.criteria) for q in questions.values() if isinstance(q, ChoiceQuestion))
        )
        self.check_text(caller_text_of(request.state), [qid + caller_text_of(q) for qid, q in questions.items()])

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

    def check_chat(self, text: str) -> None:
        least = self.least_tokens(text)
        if least > self.n_ctx:
            raise TokenBudgetExceeded(
                f"the messages hold {len(text)} characters, at least {least} tokens for this model, over the "
                f"context budget of {self.n_ctx} tokens (SM_LLAMA_CPP_CTX_SIZE)"
            )
