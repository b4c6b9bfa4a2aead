"""The systemone template of a decision-tuned GGUF: its renders, split into a shared prefix and per-pass suffixes.

`tokenizer.chat_template.systemone` is rendered once per question and pass, and split into the prefix
evaluated once per request and each pass's suffix (llama.cpp's tools/server/server-decision.cpp
renders it the same way).

Variables: `id`, `type`, `instructions`, `state`, `options` ([{key, description}]), `images` ([]) and,
for schemes with codes, `label` (the codes in slot order). Values are passed as the request holds
them: strings as strings, objects and arrays as such; the template turns non-strings into text with
`tojson`; it renders in the chat templates' sandbox (sandbox.py), with `bos_token` and `eos_token`.

Sharing the state across questions: rendering two unlike probe questions over the real state gives
the text that does not depend on the question; cut after its last newline, at a point where
tokenizing the two sides apart changes no token, it is the prefix. Each pass evaluates the rest of
its own render, so the model reads exactly the tokens of the whole render.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from decision_spec.gguf_metadata import TEMPLATE_KEY, InvalidDecisionMetadata
from decision_spec.schemas import Text
from jinja2 import TemplateError

from ..core.errors import RuntimeFailure
from .sandbox import Tokenize, sandbox, to_json

_STABLE_CUT_TRIES = (8, 32)  # newline cuts, then character cuts, tried before giving up on a prefix


class TemplateNotSeparable(RuntimeFailure):
    """A render does not start with the question-independent prefix found by the probes."""


@dataclass(frozen=True)
class QuestionView:
    """What the template is told about one question in one pass."""

    qid: str
    type: str
    instructions: Any
    options: list[dict[str, Any]]
    labels: list[str]


# Unlike in every variable (id, type, instructions, option count, keys, descriptions, labels), so the
# text two probe renders share is text no question can change.
_PROBES = (
    QuestionView(
        "probe-1",
        "noul",
        "Alpha probe: is it so?",
        [{"key": "true", "description": "Yes, alpha"}, {"key": "false", "description": None}],
        ["A", "B"],
    ),
    QuestionView(
        "q2",
        "choice",
        "Which beta option fits?",
        [
            {"key": "Gamma", "description": "third"},
            {"key": "Delta", "description": {"note": "fourth"}},
            {"key": "Epsilon", "description": None},
        ],
        ["AA", "AB", "AC"],
    ),
)
_SENTINEL_STATES: tuple[Text, Text] = ("Sentinel state, first.", {"sentinel": ["second", 2]})


@dataclass(frozen=True)
class _Split:
    texts: list[str]  # what the engine evaluates once per request, in units
    prefix: str  # their concatenation: every render of this state starts with it


class SystemOneTemplate:
    """The GGUF's systemone template: renders, and the prefix/suffix split that shares the state."""

    def __init__(
        self,
        source: str,
        *,
        bos_text: str,
        eos_text: str,
        add_bos: bool,
        tokenize: Tokenize,
        with_labels: bool,
        cache_size: int,
    ) -> None:
        try:
            self._template = sandbox().from_string(source)
        except TemplateError as e:
            raise InvalidDecisionMetadata(f"{TEMPLATE_KEY} does not compile: {e}") from None
        self.sha256 = hashlib.sha256(source.encode("utf-8")).hexdigest()
        self.bos_text, self.eos_text, self.with_labels = bos_text, eos_text, with_labels
        self._tokenize = tokenize
        self._splits: OrderedDict[str, _Split] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = max(1, cache_size)
        try:
            renders = [[self.render(state, probe) for probe in _PROBES] for state in _SENTINEL_STATES]
        except RuntimeFailure as e:
            raise InvalidDecisionMetadata(f"{TEMPLATE_KEY} fails on a probe question: {e}") from None
        first = renders[0][0]
        self.add_bos = add_bos and not (bos_text and first.startswith(bos_text))  # never a second BOS
        everything = [r for row in renders for r in row]
        ending = first[len(first) - _common_prefix_len([r[::-1] for r in everything]) :]
        last_line = _last_line(first)
        self.tail = last_line if len(last_line) <= len(ending) else ending
        # The head, independent of state and question: its own unit, tokenized once, kept in KV across states.
        cut = _stable_cut(first, _common_prefix_len(everything), tokenize)
        self.head = first[:cut] if cut and all(_stable_at(r, cut, tokenize) for r in everything[1:]) else ""
        self._head_tokens = list(tokenize(self.head))
        try:
            prefix = self.split(_SENTINEL_STATES[0]).prefix
        except TemplateNotSeparable as e:
            raise InvalidDecisionMetadata(str(e)) from None
        self.shares_state = str(_SENTINEL_STATES[0]) in prefix

    def render(self, state: Text, q: QuestionView) -> str:
        context: dict[str, Any] = {
            "id": q.qid,
            "type": q.type,
            "instructions": q.instructions,
            "state": state,
            "options": q.options,
            "images": [],
            "bos_token": self.bos_text,
            "eos_token": self.eos_text,
        }
        if self.with_labels:
            context["label"] = q.labels
        try:
            return self._template.render(**context)
        except Exception as e:  # the template is the model's code: any failure is the server's, named
            raise RuntimeFailure(f"the model's {TEMPLATE_KEY} failed to render: {type(e).__name__}: {e}") from None

    def split(self, state: Text) -> _Split:
        key = to_json(state)
        with self._lock:
            hit = self._splits.get(key)
            if hit is not None:
                self._splits.move_to_end(key)
                return hit
        split = self._compute_split(state)
        with self._lock:
            self._splits[key] = split
            while len(self._splits) > self._cache_size:
                self._splits.popitem(last=False)
        return split

    def suffix(self, state: Text, q: QuestionView) -> str:
        prefix = self.split(state).prefix
        text = self.render(state, q)
        if not text.startswith(prefix):
            raise TemplateNotSeparable(
                f"the model's {TEMPLATE_KEY} puts question-specific text before text the probe questions shared "
                f"(question type {q.type}, {len(q.options)} options), so the state cannot be evaluated once for "
                f"all questions"
            )
        return text[len(prefix) :]

    def _compute_split(self, state: Text) -> _Split:
        first, second = (self.render(state, probe) for probe in _PROBES)
        full = list(self._tokenize(first))
        cut = _stable_cut(first, _common_prefix_len([first, second]), self._tokenize, full)
        if cut is None:
            if not self.add_bos:
                raise TemplateNotSeparable(
                    f"the model's {TEMPLATE_KEY} starts with question-specific text and the model has no BOS "
                    f"token, so there is no shared prefix to evaluate"
                )
            return _Split([""], "")  # the engine's BOS alone
        prefix, head = first[:cut], self.head
        if head and len(head) < cut and prefix.startswith(head):
            body = prefix[len(head) :]
            if self._head_tokens + list(self._tokenize(body)) + list(self._tokenize(first[cut:])) == full:
                return _Split([head, body], prefix)
        return _Split([prefix], prefix)


def _common_prefix_len(texts: list[str]) -> int:
    """Binary search over slice comparisons: renders hold the whole state (up to megabytes), and a
    character loop in Python would cost seconds where this costs milliseconds."""
    lo, hi = 0, min(len(t) for t in texts)
    first = texts[0]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        head = first[:mid]
        if all(t.startswith(head) for t in texts[1:]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _last_line(text: str) -> str:
    body = text[:-1] if text.endswith("\n") else text
    return text[body.rfind("\n") + 1 :]


def _stable_at(text: str, cut: int, tokenize: Tokenize, full: list[int] | None = None) -> bool:
    whole = full if full is not None else list(tokenize(text))
    return list(tokenize(text[:cut])) + list(tokenize(text[cut:])) == whole


def _stable_cut(text: str, limit: int, tokenize: Tokenize, full: list[int] | None = None) -> int | None:
    """The last cut before `limit`, leaving at least one shared character after it, where tokenizing
    the two sides apart gives the tokens of the whole (a newline then "\\n..." can merge into one
    token): cuts after a newline first, then any character."""
    newline_cuts: list[int] = []
    p = text.rfind("\n", 0, max(0, limit - 1))
    while p >= 0 and len(newline_cuts) < _STABLE_CUT_TRIES[0]:
        newline_cuts.append(p + 1)
        p = text.rfind("\n", 0, p)
    char_cuts = range(limit - 1, max(0, limit - 1 - _STABLE_CUT_TRIES[1]), -1)
    whole = full if full is not None else list(tokenize(text))
    candidates: list[int] = newline_cuts + list(char_cuts)
    for cut in candidates:
        if cut > 0 and _stable_at(text, cut, tokenize, whole):
            return cut
    return None
