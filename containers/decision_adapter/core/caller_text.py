"""Caller text as data: every string a request carries is marked before a prompt scheme renders it, and a
marked prompt is tokenized so that only the template's own text can become a control token.

A scheme renders strings (the generic prompt, a GGUF's Jinja systemone template) and the engine tokenizes
them. Marking keeps the scheme code unchanged: each caller string travels between two marker characters
(Egyptian hieroglyphs, printable, so that `str()` and `tojson` keep them as they are; a caller's own
marker characters are replaced before marking). The tokenizer (`ControlVocabulary.tokenize`) strips
the markers and looks for the model's protected strings (every token the GGUF declares as control,
user-defined or unknown: BOS/EOS, turn markers, `<think>`, tool markers) overlapping caller characters:
- none (ordinary text): the clean text is tokenized whole with special tokens parsed, exactly as before;
- some: the text is cut inside each such occurrence, the caller pieces are tokenized with special-token
  parsing off, and the rest as before; no protected token id can then come from a caller character.
A marker left open (a template that slices a string) counts the rest of the text as the caller's: when
in doubt, text is data.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

from pydantic import BaseModel

from .string_set import StringSet

OPEN, CLOSE = "\U00013000", "\U00013001"
REPLACEMENT = "\ufffd"  # what a caller's own marker character reads as
_STRIP = str.maketrans({OPEN: None, CLOSE: None})
_NEUTRAL = str.maketrans({OPEN: REPLACEMENT, CLOSE: REPLACEMENT})
_MARKER = re.compile(f"[{OPEN}{CLOSE}]")

RawTokenize = Callable[[str, bool, bool], Sequence[int]]  # (text, add_bos, parse_special) -> token ids


M = TypeVar("M", bound=BaseModel)


def mark(value: Any) -> Any:
    """The value with every string in it (object keys included) marked as the caller's; other scalars as they are.
    Walked with an explicit stack: each string and container is visited once, however deep the nesting."""
    if isinstance(value, BaseModel):
        return mark_model(value)
    if not isinstance(value, dict | list):
        return _mark_scalar(value)
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (value, where its marked copy goes, the key there)
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, dict):
            copy: Any = {}
            for k, v in item.items():
                copy[_mark_scalar(k)] = None
                stack.append((v, copy, _mark_scalar(k)))
        elif isinstance(item, list):
            copy = [None] * len(item)
            stack.extend((v, copy, i) for i, v in enumerate(item))
        elif isinstance(item, BaseModel):
            copy = mark_model(item)
        else:
            copy = _mark_scalar(item)
        parent[slot] = copy
    return root[0]


def _mark_scalar(value: Any) -> Any:
    return OPEN + value.translate(_NEUTRAL) + CLOSE if isinstance(value, str) else value


def caller_fields(model: BaseModel) -> dict[str, Any]:
    """A request model's fields the caller wrote as text: all but its `type` and the `x_` extensions, which are
    this adapter's own switches."""
    return {n: getattr(model, n) for n in type(model).model_fields if n != "type" and not n.startswith("x_")}


def mark_model(model: M) -> M:
    """A copy of a request model (a question, its criteria) with every caller string marked."""
    return model.model_copy(update={n: mark(v) for n, v in caller_fields(model).items()})


def caller_strings(value: Any, *, scalars: bool = False) -> Iterator[str]:
    """Every string `mark` would mark in a value (object keys included), in document order; with `scalars`, numbers
    and booleans too, as JSON writes them (what a rendered state shows of them). An explicit stack: each value is
    visited once, so the walk costs what the value holds, not that times its depth."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for k, v in reversed(item.items()):
                stack.append(v)
                stack.append(k)
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, BaseModel):
            stack.extend(reversed(caller_fields(item).values()))
        elif scalars and isinstance(item, bool):
            yield "true" if item else "false"
        elif scalars and isinstance(item, int | float):
            yield json.dumps(item)


@dataclass(frozen=True)
class Walked:
    """A caller value walked once: what `mark` and `caller_strings` (with and without scalars) give, and its nesting,
    from one pass."""

    marked: Any  # the value with every string marked (mark)
    strings: tuple[str, ...]  # its strings, object keys included, in document order (caller_strings): the flags'
    text: str  # its strings, numbers and booleans joined (caller_strings with scalars): what tokens are counted from
    depth: int  # how many objects and arrays deep it goes (a string: 0; a request model's own level not counted)


_KEY = object()  # a stack entry that is an object key: its string is read, its marked copy placed with its value


def walk(value: Any) -> Walked:
    """`value` walked once with an explicit stack, in document order: each string and container visited once,
    however deep the nesting. A request model's caller fields are walked at its own level, and its marked copy made
    once its fields are (mark_model)."""
    strings: list[str] = []
    text: list[str] = []
    deepest = 0
    root: list[Any] = [None]
    models: list[tuple[BaseModel, dict[str, Any], Any, Any]] = []  # (model, its marked fields, where its copy goes)
    # (value, where its marked copy goes, the key there, the objects and arrays around it)
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, slot, depth = stack.pop()
        if parent is _KEY:
            if isinstance(item, str):
                strings.append(item)
            text.extend(_scalar_text(item))
            continue
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            copy: Any = {}
            for k, v in reversed(item.items()):
                stack.append((v, copy, _mark_scalar(k), depth + 1))
                stack.append((k, _KEY, None, depth))
            for k in item:  # the copy keeps the keys' order
                copy[_mark_scalar(k)] = None
        elif isinstance(item, list):
            deepest = max(deepest, depth + 1)
            copy = [None] * len(item)
            stack.extend((v, copy, i, depth + 1) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, BaseModel):
            fields = caller_fields(item)
            marked: dict[str, Any] = dict.fromkeys(fields)
            models.append((item, marked, parent, slot))
            stack.extend((v, marked, n, depth) for n, v in reversed(fields.items()))
            continue  # placed once its fields are marked, below
        else:
            if isinstance(item, str):
                strings.append(item)
            text.extend(_scalar_text(item))
            copy = _mark_scalar(item)
        parent[slot] = copy
    for model, marked, parent, slot in reversed(models):  # inner models were met last: their copies go in first
        parent[slot] = model.model_copy(update=marked)
    return Walked(root[0], tuple(strings), "".join(text), deepest)


def _scalar_text(value: Any) -> tuple[str, ...]:
    """What a scalar shows of itself in a rendered value (caller_strings with scalars): a string its text, a boolean
    or a number as JSON writes it, null nothing."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, bool):
        return ("true" if value else "false",)
    if isinstance(value, int | float):
        return (json.dumps(value),)
    return ()


def is_marked(text: str) -> bool:
    """Whether a text holds caller text (a marker)."""
    return OPEN in text or CLOSE in text


def unmark(text: str) -> str:
    return text.translate(_STRIP)


def caller_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text without markers, and the [start, end) spans of caller characters in it (merged, in order)."""
    if not is_marked(text):
        return text, []
    clean = text.translate(_STRIP)
    spans: list[tuple[int, int]] = []
    depth, start = 0, 0
    for removed, m in enumerate(_MARKER.finditer(text)):
        pos = m.start() - removed  # where the marker sits in the clean text
        if m.group() == OPEN:
            if depth == 0:
                start = pos
            depth += 1
        elif depth == 0:  # a close with no open: this text began inside caller text, or a template sliced it
            spans = [(0, pos)] if pos else []
        else:
            depth -= 1
            if depth == 0 and pos > start:
                _add(spans, start, pos)
    if depth and len(clean) > start:  # left open: the rest is the caller's
        _add(spans, start, len(clean))
    return clean, spans


def _add(spans: list[tuple[int, int]], start: int, end: int) -> None:
    if spans and spans[-1][1] >= start:
        spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
    else:
        spans.append((start, end))


class ControlVocabulary:
    """The model's protected strings (control, user-defined and unknown tokens' texts) and the tokenizer
    that keeps caller characters from reading as any of them. `structural`: the ids of those that carry a
    prompt's structure (turn and role markers, BOS/EOS, think and tool tags), which the control_strings flag
    counts; the rest (Gemma's HTML tags) are cut like them but are ordinary text to flag."""

    def __init__(
        self, protected: dict[int, str], raw_tokenize: RawTokenize, *, structural: Iterable[int] | None = None
    ) -> None:
        self.protected = dict(protected)
        self.strings = frozenset(s for s in protected.values() if s)
        keep = set(protected) if structural is None else set(structural)
        self.structural = frozenset(s for t, s in protected.items() if s and t in keep)
        self.scan = StringSet(self.strings)
        self._structural_scan = self.scan if self.structural == self.strings else StringSet(self.structural)
        self._raw = raw_tokenize
        self._short: dict[str, tuple[int, ...]] = {}

    def contains_protected(self, text: str) -> bool:
        return bool(self.scan.longest_at(text, first_only=True))

    def contains_structural(self, text: str) -> bool:
        """Whether text holds a string that carries a prompt's structure (the control_strings flag)."""
        return bool(self._structural_scan.longest_at(text, first_only=True))

    def hazards(self, text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Occurrences of protected strings (at each start the longest) that overlap a caller character, in order."""
        ends = [e for _, e in spans]
        out = []
        for s, e in sorted(self.scan.longest_at(text).items()):
            i = bisect.bisect_right(ends, s)  # the first span ending after s
            if i < len(spans) and spans[i][0] < e:
                out.append((s, e))
        return out

    def tokenize(self, marked: str, *, add_bos: bool = False) -> tuple[int, ...]:
        """The tokens of a marked text: no protected token id from a caller character, and for text whose
        caller parts hold no protected string, exactly the tokens of the clean text with special tokens parsed."""
        text, spans = caller_spans(marked)
        hazards = self.hazards(text, spans) if spans else []
        if not hazards:
            return tuple(self._raw(text, add_bos, True))
        tokens: list[int] = []
        for i, (a, b, special) in enumerate(pieces(text, hazards)):
            bos = add_bos and i == 0
            if special and not _inside(spans, a, b):
                tokens += self._raw(text[a:b], bos, True)
            else:  # caller text with no protected string inside reads the same with parsing off, and faster
                tokens += self._text_tokens(text[a:b]) if not bos else self._raw(text[a:b], bos, False)
        return tuple(tokens)

    def _text_tokens(self, piece: str) -> Sequence[int]:
        """A caller piece with parsing off; the short ones (the pieces of cut markers: `<`, `|im_end|>`) repeat."""
        if len(piece) > 32:
            return self._raw(piece, False, False)
        hit = self._short.get(piece)
        if hit is None:
            if len(self._short) >= 4096:
                self._short.clear()
            hit = self._short[piece] = tuple(self._raw(piece, False, False))
        return hit


def pieces(text: str, hazards: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """(start, end, parse special tokens) pieces tokenized one by one: each hazard is cut after its first character
    and at its end, and what lies within a hazard reads with special-token parsing off. One cut suffices: a protected
    string inside a piece that overlapped a caller character would start where a hazard starts (each start's longest
    contains it), and that piece is one character, which cannot be cut and reads as text. One sweep over the sorted
    cuts and hazards: `reach` is the furthest end of the hazards that start at or before the piece."""
    cuts = {0, len(text)}
    for s, e in hazards:
        cuts.update((s, s + 1, e))
    out, j, reach = [], 0, -1
    for a, b in pairwise(sorted(cuts)):
        while j < len(hazards) and hazards[j][0] <= a:
            reach = max(reach, hazards[j][1])
            j += 1
        out.append((a, b, reach < b))
    return out


def _inside(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    """Whether [a, b) lies within one caller span."""
    i = bisect.bisect_right(spans, a, key=lambda span: span[0]) - 1
    return i >= 0 and spans[i][0] <= a and b <= spans[i][1]
