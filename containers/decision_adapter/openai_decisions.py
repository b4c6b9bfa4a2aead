"""OpenAI's Decisions API: its request parsed into the decision the engine reads (asked.py's `Asked`, as System One's
is), and OpenAI's `Decision` rendered from the decision answered (answers.py's `Answered`: the same scored options,
policy actions and run identity System One's response is rendered from). handlers.answer_openai runs it.

A string `input` is the state as it is; a list of items (messages, function calls and their outputs, custom tool
calls and theirs) is the state as a JSON array of one object per item, in order, so that no item's text can pass
for another item (the engine marks every string in it as caller data). A question's id is its `name` where every
named question has its own, else its place (`#0`, `#1`, ...). A choice's option key is its value's text; where a
string and a boolean share one, the boolean's key says it is one (`true (boolean)`). A level with a description is
the text `label: description`. An answer is a `refusal` where a served policy abstains because the model declined
the offered options (REFUSAL_REASONS): it put more on "none of these" than the policy allows, or too little of its
probability on the option labels. Any other action, abstentions on a confidence band included, is an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from decision_spec import contract
from decision_spec.question_types import kind_of
from decision_spec.schemas import AnyQuestion, ChoiceQuestion, NoulQuestion, ScoreQuestion, Text

from . import openai_schemas as oa
from .answers import Answered
from .asked import Asked, asked
from .core.errors import InvalidRequest

ROUTE = "/v1/decisions"
REFUSAL_REASONS = ("out_of_scope", "low_label_mass")
Value = str | bool


@dataclass(frozen=True)
class Parsed:
    """An OpenAI request as the engine reads it, and what renders its answers in OpenAI's shape: each question's
    name, and per choice question its option keys' typed values, per score question its level labels."""

    asked: Asked
    names: dict[str, str | None]  # question id -> the question's name, in question order
    values: dict[str, dict[str, Value]] = field(default_factory=dict)
    labels: dict[str, list[str]] = field(default_factory=dict)


def _invalid(loc: list[str | int], msg: str) -> InvalidRequest:
    return InvalidRequest([{"loc": ["body", *loc], "msg": msg, "type": "value_error"}])


def _image(loc: list[str | int]) -> InvalidRequest:
    return _invalid([*loc, "type"], "input_image is not served: this adapter's models read text only")


def _content(parts: str | list[Any], loc: list[str | int]) -> Text:
    """Text parts as their text (one text part: the string itself), JSON parts as {"json": data}, refusals as
    {"refusal": text}; an image is refused."""
    if isinstance(parts, str):
        return parts
    out: list[Any] = []
    for j, part in enumerate(parts):
        if isinstance(part, oa.InputText | oa.OutputText):
            out.append(part.text)
        elif isinstance(part, oa.InputJson):
            out.append({"json": part.data})
        elif isinstance(part, oa.RefusalText):
            out.append({"refusal": part.refusal})
        elif isinstance(part, oa.InputImage):
            raise _image([*loc, j])
    return out[0] if len(out) == 1 and isinstance(out[0], str) else out


def _item(item: oa.InputItem, loc: list[str | int]) -> dict[str, Any]:
    if isinstance(item, oa.Message):
        if not isinstance(item.content, str):
            for j, part in enumerate(item.content):
                if part.type not in oa.ROLE_PARTS[item.role]:
                    raise _invalid([*loc, "content", j, "type"], f"a {item.role} message cannot carry {part.type}")
        rendered: dict[str, Any] = {"role": item.role, "content": _content(item.content, [*loc, "content"])}
        if item.phase is not None:
            rendered["phase"] = item.phase
        return rendered
    if isinstance(item, oa.FunctionCall | oa.CustomToolCall):
        call: dict[str, Any] = {"type": item.type, "call_id": item.call_id, "name": item.name}
        if item.namespace is not None:
            call["namespace"] = item.namespace
        if isinstance(item, oa.FunctionCall):
            return call | {"arguments": item.arguments}
        return call | {"input": item.input}
    return {"type": item.type, "call_id": item.call_id, "output": _content(item.output, [*loc, "output"])}


CALL_OF_OUTPUT = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def state_of(value: str | list[oa.InputItem]) -> Text:
    """The state: a string as it is; items as one JSON object each, every tool output after its call."""
    if isinstance(value, str):
        return value
    calls: set[tuple[str, str]] = set()
    state = []
    for i, item in enumerate(value):
        if isinstance(item, oa.FunctionCall | oa.CustomToolCall):
            calls.add((item.type, item.call_id))
        elif isinstance(item, oa.FunctionCallOutput | oa.CustomToolCallOutput) and (
            (CALL_OF_OUTPUT[item.type], item.call_id) not in calls
        ):
            msg = f"no earlier {CALL_OF_OUTPUT[item.type]} has call_id {item.call_id!r}"
            raise _invalid(["input", i, "call_id"], msg)
        state.append(_item(item, ["input", i]))
    return state


def _instructions(value: oa.Instructions, loc: list[str | int]) -> Text:
    return _content(value, loc)


def _question_ids(body: oa.DecisionCreate) -> list[str]:
    names = [q.name for q in body.questions]
    named = [n for n in names if n]
    if len(set(named)) == len(named):
        ids = [n or f"#{i}" for i, n in enumerate(names)]
        if len(set(ids)) == len(ids):
            return ids
    return [f"#{i}" for i in range(len(names))]


def _choice_keys(question: oa.OpenAIChoiceQuestion, loc: list[str | int]) -> dict[str, Value]:
    """Option key -> typed value, in declared order; a repeated value is refused."""
    seen: set[tuple[type, Value]] = set()
    texts = {c.value for c in question.choices if isinstance(c.value, str)}
    keys: dict[str, Value] = {}
    for j, choice in enumerate(question.choices):
        if (type(choice.value), choice.value) in seen:
            raise _invalid([*loc, "choices", j, "value"], "each choice must be unique")
        seen.add((type(choice.value), choice.value))
        key = choice.value
        if isinstance(choice.value, bool):
            key = "true" if choice.value else "false"
            if key in texts:
                key = f"{key} (boolean)"
        if key in keys:  # a string that reads as a boolean's marked key
            raise _invalid([*loc, "choices", j, "value"], f"choice {key!r} reads as another choice to the model")
        keys[str(key)] = choice.value
    return keys


def parse(body: oa.DecisionCreate) -> Parsed:
    """The decision OpenAI's request asks: the same state, options and order a System One request would give the
    engine. Its questions are the kinds' models built from fields its own schema has validated (the same limits), so
    nothing is validated twice; its text is walked once, as every dialect's is (asked.py)."""
    questions: dict[str, AnyQuestion] = {}
    names: dict[str, str | None] = {}
    values: dict[str, dict[str, Value]] = {}
    labels: dict[str, list[str]] = {}
    for i, (qid, q) in enumerate(zip(_question_ids(body), body.questions, strict=True)):
        loc: list[str | int] = ["questions", i]
        names[qid] = q.name
        common: dict[str, Any] = {
            "instructions": _instructions(q.instructions, [*loc, "instructions"]),
            "x_out_of_scope": q.x_out_of_scope,
            "x_slot_probabilities": q.x_slot_probabilities,
        }
        if isinstance(q, oa.OpenAIPredicateQuestion):
            questions[qid] = NoulQuestion.model_construct(type="noul", criteria=None, **common)
        elif isinstance(q, oa.OpenAIChoiceQuestion):
            values[qid] = _choice_keys(q, loc)
            described = {c.value: c.description for c in q.choices}
            criteria: dict[str, Text | None] = {key: described[value] for key, value in values[qid].items()}
            questions[qid] = ChoiceQuestion.model_construct(type="choice", criteria=criteria, **common)
        elif isinstance(q, oa.OpenAIScoreQuestion):
            labels[qid] = [level.label for level in q.levels]
            levels: list[Text] = [f"{lv.label}: {lv.description}" if lv.description else lv.label for lv in q.levels]
            questions[qid] = ScoreQuestion.model_construct(type="score", criteria=levels, **common)
    return Parsed(asked(body.model, state_of(body.input), questions), names, values, labels)


def answer_of(parsed: Parsed, answered: Answered, qid: str) -> oa.OpenAIAnswer:
    """One answer in OpenAI's shape, from the scored options: its type's, or a refusal where the policy declined it
    because the model did (REFUSAL_REASONS)."""
    name, extensions = parsed.names[qid], answered.extensions[qid]
    taken = answered.verdicts.get(qid)
    if taken is not None and taken.action == "abstain" and taken.reason in REFUSAL_REASONS:
        return oa.OpenAIRefusalAnswer(name=name, **extensions)
    scored, qtype = answered.outcome.answers[qid], answered.questions[qid].type
    probs = scored.probs
    if qtype == "noul":
        return oa.OpenAIPredicateAnswer(name=name, probability=probs[0], **extensions)
    if qtype == "choice":
        values = parsed.values[qid]
        return oa.OpenAIChoiceAnswer(
            name=name,
            choice=values[scored.keys[kind_of(qtype).pick(probs)]],
            confidence=contract.choice_confidence(probs),
            probabilities=[
                oa.ChoiceProbability(value=values[k], probability=p) for k, p in zip(scored.keys, probs, strict=True)
            ],
            **extensions,
        )
    labels = parsed.labels[qid]
    return oa.OpenAIScoreAnswer(
        name=name,
        score=contract.score_expectation(probs),
        confidence=contract.score_confidence(probs),
        probabilities=[oa.ScoreProbability(label=labels[i], value=i, probability=p) for i, p in enumerate(probs)],
        **extensions,
    )


def usage_of(answered: Answered) -> oa.OpenAIUsage:
    """The state's tokens count as cached where the state was reused, as written where it was evaluated; neither
    where the endpoint is shared."""
    outcome = answered.outcome
    state_tokens = (
        0 if answered.shared else outcome.input_tokens - sum(a.suffix_tokens for a in outcome.answers.values())
    )
    reused = outcome.state_source in ("resident", "cache")
    return oa.OpenAIUsage(
        input_tokens=outcome.input_tokens,
        input_tokens_details=oa.InputTokensDetails(
            cached_tokens=state_tokens if reused else 0, cache_write_tokens=0 if reused else state_tokens
        ),
        total_tokens=outcome.input_tokens,  # nothing is generated
    )


def decision_of(parsed: Parsed, answered: Answered) -> oa.Decision:
    """OpenAI's `Decision`, answers in question order."""
    return oa.Decision(
        model=answered.model,
        answers=[answer_of(parsed, answered, qid) for qid in answered.questions],
        usage=usage_of(answered),
        x_run=answered.run,
        x_timing_ms=answered.timings(),
        x_evaluated_tokens=answered.evaluated_tokens(),
    )


def wire(decision: oa.Decision) -> dict[str, Any]:
    """The body: None fields left out, except each answer's `name` (null for an unnamed question)."""
    body = decision.model_dump(exclude_none=True)
    for answer, written in zip(decision.answers, body["answers"], strict=True):
        written["name"] = answer.name
    return body
