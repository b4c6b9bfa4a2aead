"""What the routes do with a request: a decision (System One's, OpenAI's translated by openai_decisions.py, or a
JSON Lines body parsed by bulk.py) or a chat request run on the model service, the response built with its run
identity, and one structured log line per decision (never the raw state or instruction text unless DECISION_LOG_TEXT
is on). The route handler answers, the service decides, the engine scores."""

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
from decision_spec.question_types import kind_of
from decision_spec.schemas import Answer, ChatCompletionRequest, DecisionRequest, DecisionResponse, RequestRun
from fastapi.responses import JSONResponse, Response

from . import bulk, openai_decisions
from . import openai_schemas as oa
from .answers import decision_response
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
    """A System One decision request (/v1/systemone, or its shape on /invocations)."""
    response, _ = await answered(s, body, route)
    return JSONResponse(response.model_dump(exclude_none=True))


async def answer_openai(s: ModelService, body: oa.DecisionCreate, route: str) -> Response:
    """An OpenAI Decisions request: System One's work on the translated request (translated in a worker thread: it
    walks every item of the input), answered in OpenAI's shape."""
    translated = await anyio.to_thread.run_sync(openai_decisions.to_decision_request, body)
    response, outcome = await answered(s, translated.request, route)
    return JSONResponse(openai_decisions.wire(openai_decisions.decision_of(translated, response, outcome)))


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
        decided = await s.decide_batch(
            [r.request for r in pending if r.request is not None], route=route, deadline=deadline
        )
        for record, d in zip(pending, decided, strict=True):
            if d.outcome is None:
                record.error = d.error
                continue
            assert record.request is not None  # pending holds only records with a request
            response = respond(
                s, record.request, d.outcome, request_id=d.request_id, route=route, latency_ms=d.latency_ms
            )
            record.line = bulk.answer_line(record.id, response.model_dump(exclude_none=True))
    return Response(bulk.body_of(records), media_type=JSON_LINES)


async def answered(s: ModelService, body: DecisionRequest, route: str) -> tuple[DecisionResponse, DecisionOutcome]:
    """One decision request answered (its model checked, its decision line written): the response and the outcome
    it was made from (OpenAI's route reads the outcome's token counts too)."""
    deadline = s.deadline()
    check_model(body, s.served_names)
    request_id = uuid.uuid4().hex
    t0 = time.perf_counter()
    outcome = await s.decide(body, request_id=request_id, route=route, deadline=deadline)
    latency_ms = (time.perf_counter() - t0) * 1e3
    return respond(s, body, outcome, request_id=request_id, route=route, latency_ms=latency_ms), outcome


def check_model(body: DecisionRequest, served_names: set[str]) -> None:
    if body.model not in served_names:
        raise ModelNotServed(f"model {body.model!r} is not served here; use one of {sorted(served_names)}")


def respond(
    s: ModelService, body: DecisionRequest, outcome: DecisionOutcome, *, request_id: str, route: str, latency_ms: float
) -> DecisionResponse:
    """The response to one decision (a request, or a record of a JSON Lines body), and its `decision` log line."""
    shared = s.settings.shared_endpoint  # withhold what tells whether another caller's state was evaluated first
    run = RequestRun(
        **s.identity.model_dump(), request_id=request_id, state_source=None if shared else outcome.state_source
    )
    response = decision_response(
        model=s.model_name,
        questions=body.questions,
        outcome=outcome,
        run=run,
        total_ms=latency_ms,
        policy=s.policy,
        min_label_mass=s.settings.min_label_mass,
    )
    if shared:
        response = response.model_copy(update={"x_timing_ms": None, "x_evaluated_tokens": None})
    _log_decision(
        s, body, response, request_id=request_id, route=route, state_source=outcome.state_source, latency_ms=latency_ms
    )
    return response


def _log_decision(
    s: ModelService,
    body: DecisionRequest,
    response: DecisionResponse,
    *,
    request_id: str,
    route: str,
    state_source: str,
    latency_ms: float,
) -> None:
    identity = s.identity.model_dump()
    questions = []
    for qid, answer in response.answers.items():
        item: dict[str, Any] = {
            "id": qid,
            "type": answer.type,
            "margin": answer.x_margin,
            "options_sha256": answer.x_options_sha256,
        }
        item |= kind_of(answer.type).log_fields(answer)
        if answer.x_action is not None and s.policy is not None:  # and the band serving it: its key in the policy
            item["action"], item["action_reason"] = answer.x_action, answer.x_action_reason
            item["band"] = s.policy.band_name(answer.type, answer.x_options_sha256)
        if answer.x_label_mass is not None:
            item["label_mass"] = round(answer.x_label_mass, 4)
        if answer.x_out_of_scope is not None:
            item["out_of_scope"] = round(answer.x_out_of_scope, 4)
        if answer.x_input_flags:
            item[events.INPUT_FLAGS_FIELD] = answer.x_input_flags
        if s.settings.log_text:
            item["instructions"] = body.questions[qid].instructions
        questions.append(item)
    line: dict[str, Any] = {
        "event": events.DECISION,
        "request_id": request_id,
        "route": route,
        "status": 200,
        "latency_ms": round(latency_ms, 2),
        "input_tokens": response.usage.input_tokens,
        "state_source": state_source,
        "questions": questions,
        events.ANSWERS_FIELD: len(response.answers),
        events.INPUT_FLAGGED_FIELD: sum(1 for a in response.answers.values() if a.x_input_flags),
        "identity": {k: identity[k] for k in IDENTITY_LOGGED},
    }
    if s.policy is not None:  # per-request counts the stack's metric filters sum (stacks/observability.py)
        line[events.POLICY_FIELD] = s.policy.version
        for action, field in ACTION_COUNT_FIELDS.items():
            line[field] = sum(1 for a in response.answers.values() if a.x_action == action)
        line.update(shift_counts(response))
    if s.settings.log_text:
        line["state"] = body.state
    requests_log.info(json.dumps(line, ensure_ascii=False, default=str))


def picked_index(answer: Answer) -> int:
    """The option an answer picks, by its place among the declared options (noul: 0 yes, 1 no)."""
    picked: int = kind_of(answer.type).picked(answer)
    return picked


# answer shape (contract.AnswerShape) -> the places of the options an answer counts as picked
PICKS: dict[str, Callable[[Answer], list[int]]] = {"categorical": lambda answer: [picked_index(answer)]}


def shift_counts(response: DecisionResponse) -> dict[str, Any]:
    """What the decision-shift metric filters sum (stacks/decision_shift.py): picks per question and option as
    `picked.q<x_options_sha256>_<option index>`, and the label mass over the answers that report one. No text."""
    picked: dict[str, int] = {}
    masses = []
    for answer in response.answers.values():
        if answer.x_options_sha256 is not None:
            for index in PICKS[kind_of(answer.type).answer_shape](answer):
                key = events.picked_key(answer.x_options_sha256, index)
                picked[key] = picked.get(key, 0) + 1
        if answer.x_label_mass is not None:
            masses.append(answer.x_label_mass)
    out: dict[str, Any] = {events.PICKED_FIELD: picked}
    if masses:
        out[events.LABEL_MASS_SUM_FIELD], out[events.LABEL_MASS_ANSWERS_FIELD] = round(sum(masses), 4), len(masses)
    return out


async def chat(s: ModelService, body: ChatCompletionRequest) -> Response:
    """An OpenAI chat completion on a chat context."""
    return JSONResponse(await s.chat(body, request_id="-", route="chat"))
