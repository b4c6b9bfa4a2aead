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
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

StateBoundary = Literal["off", "tagged"]  # DECISION_STATE_BOUNDARY: how the generic prompt marks the state as data
OPEN, CLOSE = "\U00013000", "\U00013001"
REPLACEMENT = "\ufffd"  # what a caller's own marker character reads as
_STRIP = str.maketrans({OPEN: None, CLOSE: None})
_NEUTRAL = str.maketrans({OPEN: REPLACEMENT, CLOSE: REPLACEMENT})
_MARKER = re.compile(f"[{OPEN}{CLOSE}]")

RawTokenize = Callable[[str, bool, bool], Sequence[int]]  # (text, add_bos, parse_special) -> token ids


M = TypeVar("M", bound=BaseModel)


def mark(value: Any) -> Any:
    """The value with every string in it (object keys included) marked as the caller's; other scalars as they are."""
    if isinstance(value, BaseModel):
        return mark_model(value)
    if isinstance(value, str):
        return OPEN + value.translate(_NEUTRAL) + CLOSE
    if isinstance(value, dict):
        return {mark(k): mark(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark(v) for v in value]
    return value


def caller_fields(model: BaseModel) -> dict[str, Any]:
    """A request model's fields the caller wrote as text: all but its `type` and the `x_` extensions, which are
    this adapter's own switches."""
    return {n: getattr(model, n) for n in type(model).model_fields if n != "type" and not n.startswith("x_")}


def mark_model(model: M) -> M:
    """A copy of a request model (a question, its criteria) with every caller string marked."""
    return model.model_copy(update={n: mark(v) for n, v in caller_fields(model).items()})


def caller_strings(value: Any) -> Iterator[str]:
    """Every string `mark` would mark in a value (object keys included)."""
    if isinstance(value, BaseModel):
        for v in caller_fields(value).values():
            yield from caller_strings(v)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from caller_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from caller_strings(v)


def unmark(text: str) -> str:
    return text.translate(_STRIP)


def caller_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text without markers, and the [start, end) spans of caller characters in it (merged, in order)."""
    if OPEN not in text and CLOSE not in text:
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
    that keeps caller characters from reading as any of them."""

    def __init__(self, protected: dict[int, str], raw_tokenize: RawTokenize) -> None:
        self.protected = dict(protected)
        self.strings = frozenset(s for s in protected.values() if s)
        self._lengths = sorted({len(s) for s in self.strings}, reverse=True)
        self._longest = self._lengths[0] if self._lengths else 0
        firsts = "".join(sorted({s[0] for s in self.strings}))
        self._first = re.compile(f"[{re.escape(firsts)}]") if firsts else None
        self._raw = raw_tokenize
        self._short: dict[str, tuple[int, ...]] = {}

    def occurrences(self, text: str, lo: int = 0, hi: int | None = None) -> Iterator[tuple[int, int]]:
        """Every occurrence (overlapping ones too) of a protected string starting in [lo, hi): at each start, the
        longest."""
        if self._first is None:
            return
        hi = len(text) if hi is None else min(hi, len(text))
        for m in self._first.finditer(text, max(0, lo), hi):
            p = m.start()
            for n in self._lengths:
                if text[p : p + n] in self.strings:
                    yield p, p + n
                    break

    def contains_protected(self, text: str) -> bool:
        return next(self.occurrences(text), None) is not None

    def hazards(self, text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Occurrences of protected strings that overlap a caller character."""
        found: set[tuple[int, int]] = set()
        for start, end in spans:
            for s, e in self.occurrences(text, start - self._longest + 1, end):
                if s < end and e > start:
                    found.add((s, e))
        return sorted(found)

    def tokenize(self, marked: str, *, add_bos: bool = False) -> tuple[int, ...]:
        """The tokens of a marked text: no protected token id from a caller character, and for text whose
        caller parts hold no protected string, exactly the tokens of the clean text with special tokens parsed."""
        text, spans = caller_spans(marked)
        hazards = self.hazards(text, spans) if spans else []
        if not hazards:
            return tuple(self._raw(text, add_bos, True))
        tokens: list[int] = []
        for i, (a, b, special) in enumerate(self.pieces(text, spans, hazards)):
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

    def pieces(
        self, text: str, spans: list[tuple[int, int]], hazards: list[tuple[int, int]]
    ) -> list[tuple[int, int, bool]]:
        """(start, end, parse special tokens) pieces tokenized one by one: each hazard is cut after its first
        character and reads with special-token parsing off, until no piece holds a protected string that
        overlaps a caller character (a single character cannot be cut: it reads as text, parsing off)."""
        cuts = {0, len(text)}
        literal: list[tuple[int, int]] = []
        pending = hazards
        while pending:
            for s, e in pending:
                cuts.update((s, s + 1, e))
                literal.append((s, e))
            bounds = sorted(cuts)
            pending = [
                (a + s, a + e)
                for a, b in pairwise(bounds)
                if b - a > 1
                for s, e in self.hazards(text[a:b], _clip(spans, a, b))
                if e - s > 1
            ]
        bounds = sorted(cuts)
        return [(a, b, not any(s <= a and b <= e for s, e in literal)) for a, b in pairwise(bounds)]


def _inside(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    """Whether [a, b) lies within one caller span."""
    i = bisect.bisect_right(spans, a, key=lambda span: span[0]) - 1
    return i >= 0 and spans[i][0] <= a and b <= spans[i][1]


def _clip(spans: list[tuple[int, int]], a: int, b: int) -> list[tuple[int, int]]:
    return [(max(s, a) - a, min(e, b) - a) for s, e in spans if s < b and e > a]
