"""What the routes do with a request: a decision (System One's, a JSON Lines body's records parsed by bulk.py, or
OpenAI's parsed by openai_decisions.py, each into the one decision the engine reads, asked.py) answered once and
rendered in its dialect (answers.py, openai_decisions.py), or a chat request run on the model service; one structured
log line per decision, from the decision answered whatever the dialect (never the raw state or instruction text
unless DECISION_LOG_TEXT is on). The route handler answers, the service decides, the engine scores."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
from decision_spec import events
from decision_spec.events import ACTION_COUNT_FIELDS
from decision_spec.names import JSON_LINES
from decision_spec.question_types import QuestionKind, kind_of
from decision_spec.schemas import ChatCompletionRequest, DecisionRequest, RequestRun
from fastapi.responses import JSONResponse, Response

from . import bulk, openai_decisions
from . import openai_schemas as oa
from .answers import Answered, answered, decision_response
from .asked import Asked, asked_of
from .core.errors import AdapterError, ModelNotServed
from .outcomes import DecisionOutcome
from .request_log import requests_log
from .service import ModelService

IDENTITY_LOGGED = (
    "model_sha256",
    "model_file",
    "llama_cpp_python",
    "llama_cpp_build",
    "image_digest",
    "prompt_template",
    "calibration",
    "order_debias",
)


async def answer(s: ModelService, body: DecisionRequest, route: str) -> Response:
    """A System One decision request (/v1/systemone, or its shape on /invocations), its text walked in a worker
    thread."""
    request = await anyio.to_thread.run_sync(asked_of, body)
    return JSONResponse(decision_response(await decided(s, request, route)).model_dump(exclude_none=True))


async def answer_openai(s: ModelService, body: oa.DecisionCreate, route: str) -> Response:
    """An OpenAI Decisions request: parsed (in a worker thread: it walks every item of the input), answered as any
    decision is, rendered in OpenAI's shape."""
    parsed = await anyio.to_thread.run_sync(openai_decisions.parse, body)
    done = await decided(s, parsed.asked, route)
    return JSONResponse(openai_decisions.wire(openai_decisions.decision_of(parsed, done)))


async def answer_json_lines(s: ModelService, body: bytes, *, route: str = "/invocations") -> Response:
    """A JSON Lines mini-batch: one admission permit (429 for the whole body when none is left) and one context for
    all its records (the service's `decide_batch`); one line per record, in the records' order. Past
    DECISION_MAX_BODY_RECORDS the body is refused before any record is read; past the request's deadline the records
    answered keep their lines and the others get `deadline_exceeded` lines. Parsed in a worker thread."""
    deadline = s.deadline()
    records = await anyio.to_thread.run_sync(bulk.parse, body, s.settings.max_body_records)
    for record in records:
        if record.request is not None:
            try:
                check_model(record.request, s.served_names)
            except AdapterError as e:
                record.request, record.error = None, e
    pending = [r for r in records if r.request is not None]
    if pending:
        outcomes = await s.decide_batch(
            [r.request for r in pending if r.request is not None], route=route, deadline=deadline
        )
        for record, d in zip(pending, outcomes, strict=True):
            if d.outcome is None:
                record.error = d.error
                continue
            assert record.request is not None  # pending holds only records with a request
            done = respond(s, record.request, d.outcome, request_id=d.request_id, route=route, latency_ms=d.latency_ms)
            record.line = bulk.answer_line(record.id, decision_response(done).model_dump(exclude_none=True))
    return Response(bulk.body_of(records), media_type=JSON_LINES)


async def decided(s: ModelService, request: Asked, route: str) -> Answered:
    """One decision answered (its model checked, its decision line written), in no dialect's shape yet."""
    deadline = s.deadline()
    check_model(request, s.served_names)
    request_id = uuid.uuid4().hex
    t0 = time.perf_counter()
    outcome = await s.decide(request, request_id=request_id, route=route, deadline=deadline)
    latency_ms = (time.perf_counter() - t0) * 1e3
    return respond(s, request, outcome, request_id=request_id, route=route, latency_ms=latency_ms)


def check_model(request: Asked, served_names: set[str]) -> None:
    if request.model not in served_names:
        raise ModelNotServed(f"model {request.model!r} is not served here; use one of {sorted(served_names)}")


def respond(
    s: ModelService, request: Asked, outcome: DecisionOutcome, *, request_id: str, route: str, latency_ms: float
) -> Answered:
    """One decision (a request, or a record of a JSON Lines body) answered under the served policy, and its
    `decision` log line."""
    shared = s.settings.shared_endpoint  # withhold what tells whether another caller's state was evaluated first
    run = RequestRun(
        **s.identity.model_dump(), request_id=request_id, state_source=None if shared else outcome.state_source
    )
    done = answered(
        model=s.model_name,
        questions=request.questions,
        outcome=outcome,
        run=run,
        latency_ms=latency_ms,
        shared=shared,
        policy=s.policy,
        min_label_mass=s.settings.min_label_mass,
    )
    _log_decision(s, request, done, request_id=request_id, route=route)
    return done


def _log_decision(s: ModelService, request: Asked, done: Answered, *, request_id: str, route: str) -> None:
    identity = s.identity.model_dump()
    outcome = done.outcome
    questions = []
    for qid, question in done.questions.items():
        scored = outcome.answers[qid]
        item: dict[str, Any] = {
            "id": qid,
            "type": question.type,
            "margin": done.extensions[qid]["x_margin"],
            "options_sha256": scored.options_sha256,
        }
        item |= kind_of(question.type).log_fields(scored.keys, scored.probs)
        taken = done.verdicts.get(qid)
        if taken is not None and s.policy is not None:  # and the band serving it: its key in the policy
            item["action"], item["action_reason"] = taken.action, taken.reason
            item["band"] = s.policy.band_name(question.type, scored.options_sha256)
        if scored.label_mass is not None:
            item["label_mass"] = round(scored.label_mass, 4)
        if scored.out_of_scope is not None:
            item["out_of_scope"] = round(scored.out_of_scope, 4)
        if scored.input_flags:
            item[events.INPUT_FLAGS_FIELD] = list(scored.input_flags)
        if s.settings.log_text:
            item["instructions"] = request.questions[qid].instructions
        questions.append(item)
    line: dict[str, Any] = {
        "event": events.DECISION,
        "request_id": request_id,
        "route": route,
        "status": 200,
        "latency_ms": round(done.latency_ms, 2),
        "input_tokens": outcome.input_tokens,
        "state_source": outcome.state_source,
        "questions": questions,
        events.ANSWERS_FIELD: len(done.questions),
        events.INPUT_FLAGGED_FIELD: sum(1 for qid in done.questions if outcome.answers[qid].input_flags),
        "identity": {k: identity[k] for k in IDENTITY_LOGGED},
    }
    if s.policy is not None:  # per-request counts the stack's metric filters sum (stacks/observability.py)
        line[events.POLICY_FIELD] = s.policy.version
        for action, field in ACTION_COUNT_FIELDS.items():
            line[field] = sum(1 for v in done.verdicts.values() if v.action == action)
        line.update(shift_counts(done))
    if s.settings.log_text:
        line["state"] = request.state
    requests_log.info(json.dumps(line, ensure_ascii=False, default=str))


# answer shape (contract.AnswerShape) -> the places, among the declared options, of those an answer counts as picked,
# from its kind and its probabilities (noul: 0 yes, 1 no)
PICKS: dict[str, Callable[[QuestionKind[Any, Any], list[float]], list[int]]] = {
    "categorical": lambda kind, probs: [kind.pick(probs)]
}


def shift_counts(done: Answered) -> dict[str, Any]:
    """What the decision-shift metric filters sum (stacks/decision_shift.py): picks per question and option as
    `picked.q<x_options_sha256>_<option index>`, and the label mass over the answers that report one. No text."""
    picked: dict[str, int] = {}
    masses = []
    for qid, question in done.questions.items():
        scored, kind = done.outcome.answers[qid], kind_of(question.type)
        for index in PICKS[kind.answer_shape](kind, scored.probs):
            key = events.picked_key(scored.options_sha256, index)
            picked[key] = picked.get(key, 0) + 1
        if scored.label_mass is not None:
            masses.append(scored.label_mass)
    out: dict[str, Any] = {events.PICKED_FIELD: picked}
    if masses:
        out[events.LABEL_MASS_SUM_FIELD], out[events.LABEL_MASS_ANSWERS_FIELD] = round(sum(masses), 4), len(masses)
    return out


async def chat(s: ModelService, body: ChatCompletionRequest) -> Response:
    """An OpenAI chat completion on a chat context."""
    return JSONResponse(await s.chat(body, request_id="-", route="chat"))
