"""The llama.cpp context: tokenization (and the token helpers the prompt schemes are built with), evaluation
in reusable units, final-position logits, and state snapshots.

Evaluation is canonical: a prompt is a list of units (header, state, question suffix, chain
letter) and each unit is always decoded by its own `eval` call, whatever is already in the KV
cache. Reuse happens only at unit boundaries, so an answer computed from a reused or restored
state is the same computation as one from scratch.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .core.caller_text import ControlVocabulary, is_marked
from .core.errors import ChatTemplateRefused, DeadlineExceeded, RuntimeFailure, TokenBudgetExceeded
from .deadline import Deadline

log = logging.getLogger("decision_adapter.runtime")

Unit = tuple[int, ...]


class LlamaRuntime:
    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.llm = llm
        self.n_ctx: int = int(llm.n_ctx())
        self.n_vocab: int = int(llm.n_vocab())
        self._units: list[Unit] = []
        self.tokens_decoded = 0  # a running count: what a request evaluated is the difference
        self.partial_rewind = True  # turned off on the first model whose memory refuses partial removal
        scan = scan_vocabulary(llm)
        self.vocabulary = ControlVocabulary(scan.protected, self._raw_tokenize, structural=scan.structural)
        self.token_reach = scan.reach

    # -- tokens
    def _raw_tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special))

    def tokenize(self, text: str, *, add_bos: bool = False) -> Unit:
        """A prompt's tokens: the template's special tokens read as such, caller text (marked, caller_text.py)
        never as a control token."""
        return self.vocabulary.tokenize(text, add_bos=add_bos)

    def token_ids(self, text: str) -> list[int]:
        """The prompt schemes' tokenizer: as `tokenize`, no BOS added."""
        return list(self.tokenize(text))

    def has_control_string(self, text: str) -> bool:
        """Whether caller text holds a string that carries a prompt's structure (the control_strings input flag)."""
        return self.vocabulary.contains_structural(text)

    def token_text(self, which: Literal["bos", "eos"]) -> str:
        """The text of the model's BOS or EOS token; empty where the model has none."""
        tid = self.llm.token_bos() if which == "bos" else self.llm.token_eos()
        if tid < 0:
            return ""
        return str(self.llm.detokenize([tid], special=True).decode("utf-8", errors="ignore"))

    def eos_token(self) -> int:
        """The model's end-of-turn (EOS) token: what follows a named option's answer where another name goes on."""
        return int(self.llm.token_eos())

    # -- evaluation
    @property
    def units(self) -> list[Unit]:
        return list(self._units)

    def eval_units(self, units: Sequence[Unit], deadline: Deadline | None = None) -> npt.NDArray[np.float32]:
        """Make the KV cache hold exactly `units` and return the logits after the last token.
        The last unit is always decoded (its logits are needed), earlier ones only if absent. `deadline` is checked
        before each prefill chunk (n_batch tokens, the batches llama-cpp-python decodes a unit in anyway)."""
        keep = 0
        while keep < len(units) - 1 and keep < len(self._units) and self._units[keep] == units[keep]:
            keep += 1
        self.rewind(keep)
        for unit in units[keep:]:
            self._decode(unit, deadline)
        return self.last_logits()

    def rewind(self, n_units: int) -> None:
        """Drop units after the first n_units from the KV cache."""
        if n_units >= len(self._units):
            return
        pos = sum(len(u) for u in self._units[:n_units])
        if n_units == 0:
            self._clear()
            return
        if self.partial_rewind and self._lib.llama_memory_seq_rm(self._memory(), -1, pos, -1):
            self.llm.n_tokens = pos
            del self._units[n_units:]
            return
        if self.partial_rewind:
            self.partial_rewind = False
            log.warning('{"event": "kv_partial_removal_unsupported", "fallback": "full state snapshots"}')
        raise NeedsRestore(n_units)

    def _decode(self, unit: Unit, deadline: Deadline | None = None) -> None:
        if self.llm.n_tokens + len(unit) > self.n_ctx:
            raise RuntimeFailure(f"context overflow: {self.llm.n_tokens} + {len(unit)} > {self.n_ctx}")
        step = max(1, int(self.llm.n_batch))
        try:
            for i in range(0, len(unit), step):
                if deadline is not None and deadline.expired():
                    if i:
                        self._clear()  # a unit half in the KV cache is nothing a later request can reuse
                    raise deadline.exceeded("the next prefill chunk")
                self.llm.eval(list(unit[i : i + step]))
        except DeadlineExceeded:
            raise
        except Exception as e:  # llama_decode failures surface as RuntimeError from the bindings
            self._clear()
            raise RuntimeFailure(f"llama_decode failed: {e}") from e
        self._units.append(unit)
        self.tokens_decoded += len(unit)

    def last_logits(self) -> npt.NDArray[np.float32]:
        ptr = self._lib.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        if not ptr:
            raise RuntimeFailure("no logits for the last position")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def _memory(self) -> Any:
        return self._lib.llama_get_memory(self.llm._ctx.ctx)

    def _clear(self) -> None:
        self._lib.llama_memory_clear(self._memory(), False)  # metadata only: zeroing the buffers costs ~20 ms
        self.llm.n_tokens = 0
        self._units.clear()

    def forget(self) -> None:
        """Drop every unit: the next evaluation starts from an empty KV cache."""
        self._clear()

    def chat_completion(self, deadline: Deadline | None = None, **params: Any) -> dict[str, Any]:
        """llama-cpp-python's chat completion on this context, its prompt tokenized as a decision's is. The messages
        come marked (caller_text.mark): the chat handler renders them in the model's template and tokenizes the
        result through the Llama object, whose `tokenize` reads a marked text with this context's vocabulary for the
        call, so the template's turn markers are control tokens and nothing a message holds is. Text without markers,
        and a marked prompt whose caller parts hold no protected string, tokenize as llama-cpp-python's own call
        does. It neither reuses a decision's KV state nor leaves one behind. `deadline` is checked before each prefill
        chunk (a generated token is one: llama-cpp-python evaluates each before sampling the next); a template's own
        refusal (`raise_exception`) is ChatTemplateRefused."""
        self._clear()
        self.llm.tokenize = self._prompt_tokens  # instance attributes over the methods, for this call only
        if deadline is not None:
            self.llm.eval = functools.partial(self._chat_eval, deadline)
        try:
            result: dict[str, Any] = self.llm.create_chat_completion(**params)
        except ValueError as e:
            if _CONTEXT_EXCEEDED in str(e):  # llama-cpp-python's "Requested tokens (n) exceed context window of m"
                raise TokenBudgetExceeded(f"{e} (context budget {self.n_ctx} tokens)") from None
            if _raised_by_template(e):
                raise ChatTemplateRefused(str(e)) from None
            raise
        finally:
            del self.llm.tokenize
            if deadline is not None:
                del self.llm.eval
            self._clear()
        return result

    def _chat_eval(self, deadline: Deadline, tokens: Sequence[int]) -> None:
        """llama-cpp-python's eval (the prompt, then each generated token), a batch at a time, the deadline checked
        before each."""
        step = max(1, int(self.llm.n_batch))
        for i in range(0, len(tokens), step):
            deadline.check("the next prefill chunk")
            type(self.llm).eval(self.llm, tokens[i : i + step])

    def _prompt_tokens(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        decoded = text.decode("utf-8", errors="replace")
        if special and is_marked(decoded):
            return list(self.vocabulary.tokenize(decoded, add_bos=add_bos))
        return list(type(self.llm).tokenize(self.llm, text, add_bos, special))

    # -- snapshots (sequence 0 only: a few MB per thousand tokens on a small model)
    def snapshot(self) -> bytes:
        ctx = self.llm._ctx.ctx
        size = self._lib.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = self._lib.llama_state_seq_get_data(ctx, buf, size, 0)
        if written == 0:
            raise RuntimeFailure("llama_state_seq_get_data wrote nothing")
        return ctypes.string_at(buf, written)  # one copy into bytes (slicing a ctypes array builds a list of ints)

    def restore(self, units: Sequence[Unit], data: bytes) -> None:
        self._clear()
        ctx = self.llm._ctx.ctx
        buf = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))  # read in place, no copy
        if self._lib.llama_state_seq_set_data(ctx, buf, len(data), 0) == 0:
            self._clear()
            raise RuntimeFailure("llama_state_seq_set_data failed")
        tokens = [t for u in units for t in u]
        self.llm.input_ids[: len(tokens)] = tokens
        self.llm.n_tokens = len(tokens)
        self._units = list(units)


_CONTEXT_EXCEEDED = "exceed context window"


def _raised_by_template(err: ValueError) -> bool:
    """Whether the error comes from a chat template's `raise_exception` (llama-cpp-python raises a ValueError there)."""
    frames = traceback.extract_tb(err.__traceback__)
    return any(f.name == "raise_exception" for f in frames[-1:])


# llama.cpp's token attributes (llama.h, enum llama_token_attr): the ones its tokenizer matches as special strings.
_ATTR_UNKNOWN, _ATTR_CONTROL, _ATTR_USER_DEFINED = 1 << 0, 1 << 3, 1 << 4
PROTECTED_ATTRS = _ATTR_UNKNOWN | _ATTR_CONTROL | _ATTR_USER_DEFINED
# Vocabularies whose tokens read at most their own text's characters (llama.h, enum llama_vocab_type: SPM, BPE);
# others (UGM's whitespace folding) give no bound.
_BOUNDED_VOCABS = (1, 2)
_PIECE_BYTES = 1024
# User-defined tokens that are markup a model reads in ordinary text (Gemma declares HTML tags): cut like every
# protected string, but no sign of a forged prompt structure.
_MARKUP = re.compile(
    r"</?(a|abbr|b|blockquote|body|br|caption|center|code|col|colgroup|dd|del|div|dl|dt|em|font|footer|h[1-6]|head|"
    r"header|hr|html|i|iframe|img|ins|kbd|li|link|main|meta|nav|ol|p|pre|q|s|script|section|small|span|strike|strong|"
    r"style|sub|sup|table|tbody|td|tfoot|th|thead|title|tr|tt|u|ul)(\s[^<>]*)?/?>",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class VocabularyScan:
    protected: dict[int, str]  # every token llama.cpp matches as a special string, with its text
    structural: frozenset[int]  # those of them that carry a prompt's structure (not markup)
    # what limits.TokenFloor counts the fewest tokens of a text from: per ASCII character the most characters a token
    # that reads it reads, the most any token reads, and the ASCII characters no token reads (dropped); None where the
    # vocabulary gives no such bound
    reach: tuple[dict[str, int], int, frozenset[str]] | None


def scan_vocabulary(llm: Any) -> VocabularyScan:
    """One pass over the GGUF's vocabulary. Protected: every token declared control, user-defined or unknown,
    with its text: the strings llama.cpp reads as one special token (BOS/EOS, turn markers, tool and think tags,
    Gemma's HTML and image tags). Not user-defined runs of whitespace (Gemma's newlines and indents): they are how
    the model reads whitespace in any text, one newline cannot be cut, and no template's structure rests on them."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    protected: dict[int, str] = {}
    structural: set[int] = set()
    reach = [0] * 128  # per ASCII byte: the longest piece (the bytes a token reads) holding it
    longest, unbounded = 1, False
    buf = ctypes.create_string_buffer(_PIECE_BYTES)
    for tid in range(int(llm.n_vocab())):
        n = llama_cpp.llama_token_to_piece(vocab, tid, buf, _PIECE_BYTES, 0, True)
        if n < 0:  # a piece longer than the buffer: no bound is safe to claim
            unbounded = True
        elif n:
            longest = max(longest, n)
            for b in set(buf.raw[:n]):
                if b < 128 and reach[b] < n:
                    reach[b] = n
        text = llama_cpp.llama_vocab_get_text(vocab, tid).decode("utf-8", errors="replace")
        attr = llama_cpp.llama_vocab_get_attr(vocab, tid)
        if not attr & PROTECTED_ATTRS:
            continue
        if attr & PROTECTED_ATTRS == _ATTR_USER_DEFINED and not text.strip():
            continue
        protected[tid] = text
        if attr & PROTECTED_ATTRS != _ATTR_USER_DEFINED or not _MARKUP.fullmatch(text):
            structural.add(tid)
    bounded = int(llama_cpp.llama_vocab_type(vocab)) in _BOUNDED_VOCABS and not unbounded
    # a character a token reads is in its piece, and a piece holds at least a byte per character it reads
    per_char = {chr(b): r for b, r in enumerate(reach) if r}
    dropped = frozenset(chr(b) for b, r in enumerate(reach) if not r)
    return VocabularyScan(protected, frozenset(structural), (per_char, longest, dropped) if bounded else None)


class NeedsRestore(Exception):
    """The model's memory cannot drop a suffix (recurrent/hybrid): restore a snapshot instead."""

    def __init__(self, n_units: int) -> None:
        super().__init__(f"restore to {n_units} units")
        self.n_units = n_units
