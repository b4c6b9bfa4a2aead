"""The flags an answer's caller text raises (`x_input_flags`): control strings of the model's vocabulary in
any caller field, and text in the state addressed to the classifier. Cheap signals for review, not a filter:
a policy can send a flagged answer to review whatever its confidence, and the decision log counts them."""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from decision_spec.contract import INPUT_FLAGS, InputFlag

from .core.caller_text import caller_strings
from .slicing import OVERLAP, stable_pieces

# Words a customer's message has no reason to address to whoever classifies it: orders to ignore the
# prompt, claims about which answer is right, answer lines, role lines. English, Spanish, French, German,
# Portuguese; it misses paraphrases (the threat model in docs/security.md says so). Matched on `normalized` text,
# so its words are written in lower case and plain letters. An order to ignore must name what the classifier
# reads (instructions, rules, the prompt...) or end on "the above/previous": "please ignore my previous email"
# is a customer's ordinary sentence.
_ADDRESSED = re.compile(
    "|".join(
        [
            r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(instruction|criteria|criterion|rule|prompt|"
            r"directive|guideline|guidance|classifier|classification|label)s?\b",
            r"\b(ignore|disregard|forget)\s+(all\s+|any\s+|everything\s+)?(of\s+)?(the\s+|your\s+)?(above|previous|"
            r"prior|preceding|earlier)(\s+(text|content|context|input|messages?))?\s*([.,;:!\n]|$|and\b)",
            r"\b(correct|right|only valid|true|best|expected)\s+(answer|option|choice|label|classification)\s+(is|=|:)",
            r"\b(you|the model|the classifier|the assistant|ai)\s+(must|should|will|shall)\s+"
            r"(answer|choose|select|pick|reply|respond|classify|output)\b",
            r"^[^\S\n]*+(final\s+)?(answer|label|classification|decision)\s*[:=]\s*\S",
            r"^[^\S\n]*+(system|assistant|developer)\s*:",
            r"\b(ignora|olvida)\b[^.\n]{0,40}\b(instrucciones|criterios|reglas)\b",
            r"\bla\s+respuesta\s+correcta\s+es\b",
            r"\b(ignorez|oubliez)\b[^.\n]{0,40}\b(instructions|critères|règles)\b",
            r"\bla\s+bonne\s+réponse\s+est\b",
            r"\b(ignoriere|vergiss)\b[^.\n]{0,40}\b(anweisungen|kriterien|regeln)\b",
            r"\bdie\s+richtige\s+antwort\s+ist\b",
            r"\b(ignore|esqueça)\b[^.\n]{0,40}\b(instruções|critérios|regras)\b",
            r"\ba\s+resposta\s+correta\s+é\b",
        ]
    ),
    re.MULTILINE,
)
# Line starts match only the spaces of their own line (`[^\S\n]*+`, possessive): `^\s*` under MULTILINE read the
# whole run of blank lines after each line start, lines x run length (issue 43). Every other repeat follows a word.
# Format characters (zero-width spaces and joiners, bidi controls, soft hyphens) and control characters but tab and
# the line ends (bytes a vocabulary drops, as SmolLM2 drops 0x04): invisible to a reader or the model, dropped.
_INVISIBLE = dict.fromkeys(
    c
    for c in range(sys.maxunicode + 1)
    if unicodedata.category(chr(c)) == "Cf" or (unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\t\n\r")
)
# Letters of other scripts drawn like Latin ones (Unicode's confusables for Cyrillic and Greek), folded to them.
_CONFUSABLES = str.maketrans(
    "аеіјорсхуѕԁɡкмнтвАВЕІЈКМНОРСТХЅαεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeijopcxysdgkmhtbABEIJKMHOPCTXSaeikvoptuxABEZHIKMNOPTYX",
)


def normalized(text: str) -> str:
    """Text as the flags read it: NFKC (fullwidth and other compatibility forms to plain ones), format characters
    removed, Cyrillic and Greek look-alikes folded to Latin, case-folded."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_CONFUSABLES).casefold()


def normalized_strings(strings: Iterable[str]) -> list[str]:
    """Each caller string as the flags read it (`normalized`), a slice at a time (slicing.stable_pieces: no C call
    holds the GIL for the whole of a long text, and the pieces normalize as the whole does): once per request, for
    this module's flag and instruction_flags.py's."""
    return ["".join(normalized(p) for p in stable_pieces(s)) for s in strings]


def addressed_to_classifier(state: Any) -> bool:
    """Whether a value's text holds words addressed to the classifier (its strings walked and normalized here)."""
    return addressed_in(normalized_strings(caller_strings(state)))


def addressed_in(lines: Iterable[str]) -> bool:
    """Whether any normalized string holds text addressed to the classifier."""
    return any(_addressed(line) for line in lines)


def _addressed(shown: str) -> bool:
    """Whether one normalized string holds text addressed to the classifier, searched a slice at a time. Each slice is
    searched with the end of the one before it (OVERLAP characters, and the character before them, so `^` and `\\b`
    read as in the whole text)."""
    before = ""
    for piece in stable_pieces(shown):
        window = before + piece
        if _ADDRESSED.search(window, 1 if before else 0):
            return True
        before = window[-(OVERLAP + 1) :]
    return False


def flags_of(
    state_flags: frozenset[InputFlag], strings: Iterable[str], has_control_string: Callable[[str], bool]
) -> list[InputFlag]:
    """One answer's flags: the state's, and control strings in its question's caller strings; in INPUT_FLAGS
    order."""
    flags = set(state_flags)
    if "control_strings" not in flags and any(has_control_string(s) for s in strings):
        flags.add("control_strings")
    return [f for f in INPUT_FLAGS if f in flags]


def state_flags(
    strings: Iterable[str], lines: Iterable[str], has_control_string: Callable[[str], bool]
) -> frozenset[InputFlag]:
    """The flags the state's strings raise here: `strings` as sent (control strings), `lines` normalized."""
    flags: set[InputFlag] = set()
    if any(has_control_string(s) for s in strings):
        flags.add("control_strings")
    if addressed_in(lines):
        flags.add("addressed_to_classifier")
    return frozenset(flags)
