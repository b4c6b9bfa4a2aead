"""The loaded model behind the routes (loading.py loads it): its engines (one llama.cpp context each), admission,
counters; `decide` runs a decision request on an engine (`DecisionEngine.score`).

Capacity is a bounded permit count, as in text-generation-inference's router (admission.py):
`max_concurrency` contexts evaluate, `max_queue` requests may wait for one, and the next request waits
up to `admission_wait_s` for a permit, then is refused with 429 and a Retry-After estimated from the
requests ahead, instead of queueing without bound.

A JSON Lines mini-batch (`decide_batch`) takes one permit and one context for all its decisions; the service
evaluates those that share a state next to each other, answers a question asked again of the same state once,
and gives each decision its outcome or its own adapter error.

Chat completions run in a lane of their own: `chat_contexts` contexts of the same weights with their own
permits (`chat_max_queue`), never on a decision context. A 256-token generation holds its context for
seconds, so on a shared context a decision would wait behind it; here it waits behind decisions only.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from decision_spec import events
from decision_spec.contract import DEFAULT_MODEL_ALIAS
from decision_spec.policy import Policy
from decision_spec.schemas import ChatCompletionRequest, RunIdentity

from .admission import Lane
from .asked import Asked
from .core.caller_text import mark
from .core.errors import AdapterError, ChatNotServed, DeadlineExceeded, RuntimeFailure, TokenBudgetExceeded, status_of
from .core.settings import AdapterSettings
from .deadline import Deadline
from .engine import AnswerMemo, DecisionEngine
from .limits import RequestLimits, TokenFloor, caller_text_of, state_key
from .outcomes import Decided, DecisionOutcome
from .request_log import log_rejection
from .runtime import LlamaRuntime

T = TypeVar("T")
E = TypeVar("E")


@dataclass
class Counters:
    decisions: int = 0
    chats: int = 0
    errors: int = 0  # runtime failures


class ModelService:
    def __init__(
        self,
        *,
        settings: AdapterSettings,
        engines: list[DecisionEngine],
        llms: list[Any],
        identity: RunIdentity,
        policy: Policy | None = None,
        chat_runtimes: list[LlamaRuntime] | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy  # the manifest's threshold policy, checked against the model and calibration at start
        self.engines = engines
        self.llms = llms
        self.identity = identity
        self.model_name = identity.model_name
        model_file = identity.model_file
        self.served_names = {DEFAULT_MODEL_ALIAS, self.model_name, model_file, model_file.removesuffix(".gguf")}
        self.counters = Counters()
        self.decision_lane = Lane(
            "decisions",
            engines,
            max_queue=settings.max_queue,
            wait_s=settings.admission_wait_s,
            retry_floor_s=settings.retry_after_s,
        )
        self.chat_lane = (
            Lane(
                "chat",
                chat_runtimes,
                max_queue=settings.chat_max_queue,
                wait_s=settings.admission_wait_s,
                retry_floor_s=settings.retry_after_s,
            )
            if chat_runtimes
            else None
        )

    @functools.cached_property
    def limits(self) -> RequestLimits:
        """What one request may ask of a context: every engine's model and budgets are the first one's."""
        first = self.engines[0]
        return RequestLimits(
            n_ctx=first.rt.n_ctx,
            max_request_tokens=first.max_request_tokens,
            floor=TokenFloor(*first.rt.token_reach) if first.rt.token_reach else None,
            max_questions=self.settings.max_questions,
            max_options=self.settings.max_options,
            max_body_tokens=self.settings.max_body_tokens or first.max_request_tokens,
        )

    # -- work
    def deadline(self) -> Deadline:
        """A new request's time budget (DECISION_REQUEST_TIMEOUT_S), from now."""
        return Deadline(self.settings.request_timeout_s)

    async def run(
        self, fn: Callable[[DecisionEngine], T], *, request_id: str, route: str, deadline: Deadline | None = None
    ) -> T:
        """Run `fn` on a decision context once admitted (or refused with 429); failures are counted and logged."""
        return await self._logged(self.decision_lane, fn, request_id=request_id, route=route, deadline=deadline)

    async def decide(
        self, request: Asked, *, request_id: str, route: str, deadline: Deadline | None = None
    ) -> DecisionOutcome:
        deadline = deadline or self.deadline()
        await self._check_limits(lambda: self.limits.check(request), request_id, route)
        outcome = await self.run(
            lambda engine: engine.score(request, deadline=deadline),
            request_id=request_id,
            route=route,
            deadline=deadline,
        )
        self.counters.decisions += 1
        return outcome

    async def decide_batch(
        self, requests: Sequence[Asked], *, route: str, deadline: Deadline | None = None
    ) -> list[Decided]:
        """A mini-batch on one permit (429 for all when none is left) and one context: one `Decided` per request,
        in their order. Refused whole (413) past the body's token limit (DECISION_MAX_BODY_TOKENS) before any work.
        A request's adapter error is its own and the others are answered; past the deadline the requests not yet
        answered get DeadlineExceeded and those answered keep their answers; a runtime failure fails them all (the
        context's state is then unknown)."""
        deadline = deadline or self.deadline()
        request_id = uuid.uuid4().hex
        await self._check_limits(lambda: self.limits.check_body(requests), request_id, route)
        decided = await self.run(
            lambda engine: decide_each(engine, requests, self.limits, route=route, deadline=deadline),
            request_id=request_id,
            route=route,
            deadline=deadline,
        )
        self.counters.decisions += sum(1 for d in decided if d.outcome is not None)
        return decided

    async def chat(
        self, request: ChatCompletionRequest, *, request_id: str, route: str, deadline: Deadline | None = None
    ) -> dict[str, Any]:
        """An OpenAI chat completion (what the stock DLC serves on /invocations) on a chat context."""
        if self.chat_lane is None:
            raise ChatNotServed(
                "chat completions are off on this endpoint (DECISION_CHAT_CONTEXTS=0); it serves decisions"
            )
        deadline = deadline or self.deadline()
        params = await anyio.to_thread.run_sync(chat_parameters, request)
        await self._check_limits(lambda: self.limits.check_chat(caller_text_of(params["messages"])), request_id, route)
        result = await self._logged(
            self.chat_lane,
            lambda rt: rt.chat_completion(deadline, **params),
            request_id=request_id,
            route=route,
            deadline=deadline,
        )
        result["model"] = self.model_name  # llama-cpp-python reports the GGUF's path on disk
        self.counters.chats += 1
        return result

    @staticmethod
    async def _check_limits(check: Callable[[], None], request_id: str, route: str) -> None:
        """A request's limits, before it waits for a context or any of its text is tokenized; in a worker thread
        (the count is linear in the text, and the event loop answers /ping meanwhile)."""
        try:
            await anyio.to_thread.run_sync(check)
        except TokenBudgetExceeded as e:
            log_rejection(request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            raise

    async def _logged(
        self, lane: Lane[E], fn: Callable[[E], T], *, request_id: str, route: str, deadline: Deadline | None = None
    ) -> T:
        try:
            return await lane.run(fn, request_id=request_id, route=route, deadline=deadline)
        except DeadlineExceeded as e:
            log_rejection(request_id, route, status_of(e), events.DEADLINE_EXCEEDED)
            raise
        except TokenBudgetExceeded as e:
            log_rejection(request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            raise
        except RuntimeFailure as e:
            self.counters.errors += 1
            log_rejection(request_id, route, status_of(e), events.RUNTIME_FAILURE)
            raise

    def metrics(self) -> dict[str, Any]:
        return {
            "decisions": self.counters.decisions,
            "chats": self.counters.chats,
            "rejected_overload": self.decision_lane.rejected,
            "errors": self.counters.errors,
            "admitted_now": self.decision_lane.admitted,
            "admission_limit": self.decision_lane.limit,
            "lanes": {lane.name: lane.describe() for lane in (self.decision_lane, self.chat_lane) if lane is not None},
            "state_cache": self.engines[0].cache.counters(),
        }

    def close(self) -> None:
        for llm in self.llms:
            llm.close()


def chat_parameters(request: ChatCompletionRequest) -> dict[str, Any]:
    """llama-cpp-python's create_chat_completion arguments for the request (256 tokens unless it says). Every string
    of a message but its role (one of the roles a template knows, schemas.ChatRole) is marked as the caller's:
    the template renders it as data (runtime.chat_completion)."""
    return {
        "messages": [
            {k: v if k == "role" else mark(v) for k, v in m.model_dump(exclude_none=True).items()}
            for m in request.messages
        ],
        "max_tokens": request.max_completion_tokens or request.max_tokens or 256,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "stop": request.stop,
        "seed": request.seed,
    }


def decide_each(
    engine: DecisionEngine,
    requests: Sequence[Asked],
    limits: RequestLimits,
    *,
    route: str,
    deadline: Deadline | None = None,
) -> list[Decided]:
    """The requests on one engine (in a worker thread) in `evaluation_order`, sharing one memo: each held to its
    limits, then given its outcome or its adapter error (a token-budget refusal logged as alone); a runtime failure
    is raised. Past the deadline, the request being scored and every one not reached get DeadlineExceeded (the
    answered ones keep their outcomes)."""
    deadline = deadline or Deadline.never()
    decided = [Decided(uuid.uuid4().hex) for _ in requests]
    memo: AnswerMemo = {}  # a question asked again of the same state, in this mini-batch, is not evaluated again
    for i in evaluation_order(requests):
        t0 = time.perf_counter()
        if deadline.expired():
            decided[i].error = deadline.exceeded("this record")
            continue
        try:
            limits.check(requests[i])
            decided[i].outcome = engine.score(requests[i], memo, deadline)
        except RuntimeFailure:
            raise
        except AdapterError as e:
            decided[i].error = e
            if isinstance(e, TokenBudgetExceeded):
                log_rejection(decided[i].request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            continue
        decided[i].latency_ms = (time.perf_counter() - t0) * 1e3
    return decided


def evaluation_order(requests: Sequence[Asked]) -> list[int]:
    """The requests' indexes with those that share a state next to each other (states in order of first
    appearance), so a state is prefilled once and stays resident for the requests after it."""
    first_seen: dict[str, int] = {}
    keyed = [(first_seen.setdefault(state_key(r.state), len(first_seen)), i) for i, r in enumerate(requests)]
    return [i for _, i in sorted(keyed)]
