"""Instructions addressed to the decider in the state (`x_input_flags`: instructs_decider), by the kinds of words they
combine rather than by fixed phrasings, so that paraphrases and other languages are caught too.

An instruction to whoever decides, whatever its words, does one of: claims which answer is right ("the correct
answer is", "the verified outcome is"), asks for a label in words only a classifier is asked ("put this down as",
"classify this as", "answer with"), or joins two of these kinds of words close together (within WINDOW
characters, across the state's fields and keys as they are rendered):
- override: ignore, disregard, forget, override, pretend, "do not follow";
- machine: what a decider reads or is (criteria, instructions, rules, prompt, options, classifier, AI, system);
- decide: a decision verb (choose, select, pick, classify, rate, approve, record, respond);
- authority: a claimed authority or settled outcome (administrator, compliance, supervisor, verified, authorize).
Each kind's words are listed in English, Spanish, French, German, Portuguese, Italian, Dutch, Russian, Chinese,
Japanese and Korean. Text is read as `input_flags.normalized` reads it (NFKC, invisible characters dropped,
look-alike letters folded, case-folded; a slice at a time, slicing.py), in one pass of an Aho-Corasick automaton
(string_set.py), so its cost is linear in the text whatever it holds; a word of a spaced script counts only whole.

A heuristic for review, not a filter (docs/security.md gives its detection and false-flag rates): an honest
customer who writes "please route this to billing" is flagged, and an attacker who writes none of these words is not.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from decision_spec.contract import InputFlag

from .core.caller_text import caller_strings
from .core.string_set import StringSet
from .input_flags import normalized, normalized_strings

WINDOW = 160  # characters: two kinds of words this close make an instruction
STRONG, OVERRIDE, MACHINE, DECIDE, AUTHORITY = "strong", "override", "machine", "decide", "authority"
CUES: dict[str, tuple[str, ...]] = {
    STRONG: (
        # en
        "correct answer", "right answer", "correct option", "right option", "correct label", "correct category",
        "correct classification", "expected label", "expected answer", "only acceptable", "only valid answer",
        "verified outcome", "verified decision", "down as", "put this as", "put it as", "mark this as",
        "mark it as", "classify this as", "classify it as", "categorize this as", "categorise this as",
        "label this as", "label it as", "tag this as", "file this under", "file it under", "treat this as",
        "count this as", "log this as", "record this as", "record it as", "rate this as", "score this as",
        "answer with", "respond with", "reply with", "your reply must", "your answer must", "output the label",
        "output only", "new instructions", "updated instructions", "system notice", "system note", "note to the",
        "note for the", "routing for this", "pre-set to", "preset to", "operator override",
        # es, pt, it
        "respuesta correcta", "opción correcta", "clasifica este", "clasifica esto", "clasifique este",
        "marca esto como", "marque esto como", "responde con", "responda con", "nota para el", "resposta correta",
        "opção correta", "marque isto como", "classifique como", "risposta corretta", "opzione corretta",
        "rispondi con", "classifica come", "classifica questo",
        # fr, de, nl
        "bonne réponse", "réponse correcte", "seule réponse", "répondez avec", "réponds avec", "classer ce",
        "classez ce", "marquez ce", "richtige antwort", "korrekte antwort", "antworte mit", "antworten sie mit",
        "entscheidung lautet", "antwort muss", "juiste antwoord", "correcte antwoord",
        # ru, zh, ja, ko
        "правильный ответ", "верный ответ", "ответь именно", "正确答案", "正确分类", "正确选项", "正确的答案",
        "归类为", "分类为", "正しい答え", "正解は", "に分類", "정답은", "올바른 답",
    ),
    OVERRIDE: (
        "ignore", "ignoring", "disregard", "forget", "override", "pretend", "do not follow", "don't follow",
        "no matter what", "whatever it says", "whatever your", "regardless of", "instead of the",
        "ignora", "ignoren", "ignorar", "ignore as", "olvida", "olvide", "haz caso omiso", "caso omiso",
        "esqueça", "esqueca", "desconsidere", "no importa", "ignorez", "oubliez", "oublie", "ne tenez pas compte",
        "peu importe", "ignoriere", "ignorieren", "vergiss", "egal was", "unabhängig von", "negeer", "vergeet",
        "ongeacht", "zignoruj", "yok say", "игнорируй", "игнорируйте", "забудь", "забудьте", "не обращай внимания",
        "忽略", "无视", "无论", "不要理会", "無視", "무시", "تجاهل", "अनदेखा",
    ),
    MACHINE: (
        "criteria", "criterion", "instruction", "instructions", "rules above", "the rules", "prompt", "guidelines",
        "options above", "the options", "option", "classifier", "classification", "the model", "ai model",
        "the assistant", "hey ai", "dear ai", "the ai", "an ai", "ai system", "llm", "language model", "bot",
        "system", "automated", "reviewer", "triage", "routing", "queue", "label", "the label", "answer", "reply",
        "decision", "verdict", "category", "whoever reads", "reading this", "evaluating this",
        "criterios", "criterio", "instrucciones", "opciones", "opción", "reglas", "clasificador", "sistema",
        "respuesta", "categoría", "instruções", "critérios", "opção", "regras", "resposta", "categoria",
        "istruzioni", "opzione", "regole", "risposta", "critères", "consignes", "options", "règles",
        "classificateur", "système", "réponse", "catégorie", "kriterien", "anweisungen", "optionen", "regeln",
        "kategorie", "antwort", "ki", "ki-system", "regels", "optie", "criteria", "systeem", "antwoord",
        "instrukcje", "opcję", "talimatları", "seçeneğini", "инструкции", "критерии", "правила", "вариант",
        "ответ", "指令", "指示", "选项", "标准", "规则", "分类", "系统", "答案", "選択肢", "システム", "지시",
        "옵션", "التعليمات", "निर्देशों",
    ),
    DECIDE: (
        "choose", "select", "pick", "classify", "categorize", "categorise", "rate", "score it", "score this",
        "approve", "record", "respond", "output", "make it", "route this", "send this to", "go with", "decide",
        "say yes", "say no", "just say", "should say",
        "elige", "elija", "escoge", "selecciona", "seleccione", "clasifica", "responde", "escolha", "selecione",
        "classifique", "responda", "scegli", "seleziona", "classifica", "rispondi", "choisissez", "choisis",
        "sélectionnez", "sélectionne", "classez", "répondez", "réponds", "wähle", "wählen sie", "ordne",
        "antworte", "kies", "selecteer", "antwoorden", "wybierz", "seç", "выбери", "выберите", "ответь",
        "选择", "回答", "选", "選んで", "選択して", "回答して", "答えて", "선택", "답하세요", "اختر", "चुनें",
    ),
    AUTHORITY: (
        "administrator", "admin", "compliance", "supervisor", "authorize", "authorise", "authorized", "verified",
        "confirmed", "already reviewed", "already decided", "official decision", "team lead", "security team",
        "administrador", "administrateur", "responsable", "validé", "administrators", "geprüfte", "bestätigt",
        "администратор", "管理员", "管理者", "관리자",
    ),
}  # fmt: skip
# Which kinds of words, close together, make an instruction: never a machine word and an authority alone ("my manager
# says the system should answer within 2 seconds" is a customer's complaint).
_JOINS = {
    STRONG: (),
    OVERRIDE: (MACHINE, DECIDE, AUTHORITY),
    MACHINE: (OVERRIDE, DECIDE),
    DECIDE: (OVERRIDE, MACHINE, AUTHORITY),
    AUTHORITY: (OVERRIDE, DECIDE),
}
_KINDS = {normalized(cue): kind for kind, cues in CUES.items() for cue in cues}
_CUES = StringSet(_KINDS)


def _spaced(c: str) -> bool:
    """Whether a character belongs to a script that writes spaces between words (its words match whole)."""
    return c.isalpha() and not unicodedata.name(c, "").startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"))


def _whole(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    first, last = text[start], text[end - 1]
    return not (_spaced(first) and before.isalnum()) and not (_spaced(last) and after.isalnum())


def instructs_decider(state: Any) -> bool:
    """Whether a value's text (its strings and object keys, in document order, one line each) holds an instruction to
    the decider (its strings walked and normalized here)."""
    return instructs(normalized_strings(caller_strings(state)))


def instructs(lines: Iterable[str]) -> bool:
    """Whether normalized strings (input_flags.normalized_strings), read as one line each, hold an instruction to the
    decider: a strong cue, or two kinds of cue within WINDOW characters."""
    text = "\n".join(lines)
    last: dict[str, int] = {}
    for start, end in sorted(_CUES.longest_at(text).items()):
        if not _whole(text, start, end):
            continue
        kind = _KINDS[text[start:end]]
        if kind == STRONG or any(start - last.get(k, -WINDOW - 1) <= WINDOW for k in _JOINS[kind]):
            return True
        last[kind] = end
    return False


def flags_raised(lines: Iterable[str]) -> frozenset[InputFlag]:
    """The state's instructs_decider flag, where its normalized strings raise it (the engine adds it to the state's
    other flags)."""
    return frozenset({"instructs_decider"}) if instructs(lines) else frozenset()
