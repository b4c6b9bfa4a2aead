"""The loaded model behind the routes: loading it, its engines (one llama.cpp context each), admission, counters.

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
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from . import events
from .admission import Lane
from .calibration import calibration_in_force
from .caller_text import mark
from .contract import DEFAULT_MODEL_ALIAS
from .engine import AnswerMemo, DecisionEngine, DecisionOutcome
from .errors import AdapterError, ChatNotServed, RuntimeFailure, TokenBudgetExceeded, status_of
from .events import log_rejection
from .gguf_metadata import ModelMetadata, read_decision_metadata
from .identity import build_identity
from .limits import RequestLimits, TokenFloor, caller_text_of
from .model_files import find_gguf, verify_model
from .policy import Policy
from .prompting import debias_mode_served, debias_tolerance_served, make_scheme, state_boundary_served
from .runtime import LlamaRuntime
from .schemas import ChatCompletionRequest, DecisionRequest, RunIdentity
from .settings import AdapterSettings, RuntimeSettings, adopt_answer_settings
from .state_cache import StateCache

log = logging.getLogger("decision_adapter.service")
T = TypeVar("T")
E = TypeVar("E")
DEFAULT_CACHE_CONTEXTS = 2  # default state-cache budget: this many full contexts' worth of KV...
DEFAULT_CACHE_CAP = 1 << 30  # ...but at most 1 GiB


@dataclass
class Counters:
    decisions: int = 0
    chats: int = 0
    errors: int = 0  # runtime failures


@dataclass
class Decided:
    """One decision of a mini-batch: its request id, and its outcome and latency or the adapter error it got."""

    request_id: str
    outcome: DecisionOutcome | None = None
    error: AdapterError | None = None
    latency_ms: float = 0.0


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
        )

    # -- loading
    @classmethod
    def load(cls, settings: AdapterSettings, runtime_settings: RuntimeSettings) -> ModelService:
        """Verify the GGUF, put the answer settings its manifest records in force (adopt_answer_settings), load it
        into `max_concurrency` decision contexts and `chat_contexts` chat contexts (the cores split across them all),
        build the engines. Blocking."""
        from llama_cpp import Llama

        path = find_gguf(settings.model_dir, runtime_settings.model)
        model = verify_model(path, settings.expected_model_sha256)
        if model.manifest is not None:  # what the artifact was evaluated under is what it serves
            settings = adopt_answer_settings(settings, model.manifest.recorded_answer_settings())
        policy = model.manifest.policy if model.manifest is not None else None
        if model.manifest is not None and policy is not None:  # refused before the weights load, as a checksum is
            policy.check_binding(model_sha256=model.sha256, calibration_sha256=model.manifest.calibration_sha256())
        vocab = Llama(str(path), vocab_only=True, verbose=False)  # metadata only: cheap
        meta: dict[str, str] = dict(vocab.metadata)
        vocab.close()
        gguf = ModelMetadata.read(meta)
        decision = read_decision_metadata(meta)  # refuse an unservable decision scheme before loading the weights
        served_mode = debias_mode_served(decision, settings)
        served_tolerance = debias_tolerance_served(decision, settings)
        served_boundary = state_boundary_served(decision, settings)
        if policy is not None:
            policy.check_debias(served_mode, served_tolerance)
            policy.check_state_boundary(served_boundary)
        contexts = settings.max_concurrency + settings.chat_contexts
        kwargs = runtime_settings.llama_kwargs(gguf.context_length, contexts=contexts)
        llms = [Llama(str(path), logits_all=False, verbose=False, **kwargs) for _ in range(contexts)]
        llms, chat_llms = llms[: settings.max_concurrency], llms[settings.max_concurrency :]
        runtimes = [LlamaRuntime(llm) for llm in llms]
        first = runtimes[0]
        scheme = make_scheme(
            gguf,
            decision,
            settings,
            bos_text=first.token_text("bos"),
            eos_text=first.token_text("eos"),
            tokenize=first.token_ids,
        )
        calibration = calibration_in_force(model.manifest, template=scheme.name, declared=scheme.declared_temperatures)
        # One cache for all contexts: a snapshot restores into any context of the same model, and the budget
        # is the process's, not each context's.
        cache = StateCache(cache_budget(settings, gguf, n_ctx=first.n_ctx))
        engines = [
            DecisionEngine(
                runtime,
                scheme,
                model_sha256=model.sha256,
                calibration=calibration,
                cache=cache,
                reuse_states=settings.state_reuse,
                out_of_scope=settings.out_of_scope,
                max_request_tokens=settings.max_request_tokens,
            )
            for runtime in runtimes
        ]
        identity = build_identity(
            model_file=path.name,
            model_sha256=model.sha256,
            model_name=settings.model_name or gguf.name or path.stem,
            image_digest=settings.image_digest,
            llama_cpp_build=settings.llama_cpp_build,
            instance_types=settings.instance_types,
            threads=int(llms[0].context_params.n_threads),
            gpu_layers=runtime_settings.n_gpu_layers,
            order_debias=scheme.order_debias,
            order_debias_mode=served_mode,
            order_debias_tolerance=served_tolerance,
            calibration=calibration.describe(),
            scheme=scheme.name,
            policy=policy.version if policy is not None else None,
            state_boundary=served_boundary,
            served=served_answer_settings(settings, generic=served_boundary is not None),
        )
        return cls(
            settings=settings,
            engines=engines,
            llms=llms + chat_llms,
            identity=identity,
            policy=policy,
            chat_runtimes=[LlamaRuntime(llm) for llm in chat_llms],
        )

    # -- work
    async def run(self, fn: Callable[[DecisionEngine], T], *, request_id: str, route: str) -> T:
        """Run `fn` on a decision context once admitted (or refused with 429); failures are counted and logged."""
        return await self._logged(self.decision_lane, fn, request_id=request_id, route=route)

    async def decide(self, request: DecisionRequest, *, request_id: str, route: str) -> DecisionOutcome:
        self._check_limits(lambda: self.limits.check(request), request_id, route)
        outcome = await self.run(lambda engine: engine.decide(request), request_id=request_id, route=route)
        self.counters.decisions += 1
        return outcome

    async def decide_batch(self, requests: Sequence[DecisionRequest], *, route: str) -> list[Decided]:
        """A mini-batch on one permit (429 for all when none is left) and one context: one `Decided` per request,
        in their order. A request's adapter error is its own and the others are answered; a runtime failure
        fails them all (the context's state is then unknown)."""
        decided = await self.run(
            lambda engine: decide_each(engine, requests, self.limits, route=route),
            request_id=uuid.uuid4().hex,
            route=route,
        )
        self.counters.decisions += sum(1 for d in decided if d.outcome is not None)
        return decided

    async def chat(self, request: ChatCompletionRequest, *, request_id: str, route: str) -> dict[str, Any]:
        """An OpenAI chat completion (what the stock DLC serves on /invocations) on a chat context."""
        if self.chat_lane is None:
            raise ChatNotServed(
                "chat completions are off on this endpoint (DECISION_CHAT_CONTEXTS=0); it serves decisions"
            )
        params = chat_parameters(request)
        self._check_limits(lambda: self.limits.check_chat(caller_text_of(params["messages"])), request_id, route)
        result = await self._logged(
            self.chat_lane, lambda rt: rt.chat_completion(**params), request_id=request_id, route=route
        )
        result["model"] = self.model_name  # llama-cpp-python reports the GGUF's path on disk
        self.counters.chats += 1
        return result

    @staticmethod
    def _check_limits(check: Callable[[], None], request_id: str, route: str) -> None:
        """A request's limits, before it waits for a context or any of its text is marked or tokenized."""
        try:
            check()
        except TokenBudgetExceeded as e:
            log_rejection(request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            raise

    async def _logged(self, lane: Lane[E], fn: Callable[[E], T], *, request_id: str, route: str) -> T:
        try:
            return await lane.run(fn, request_id=request_id, route=route)
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


def served_answer_settings(settings: AdapterSettings, *, generic: bool) -> dict[str, Any]:
    """The answer settings x_run reports beside the debias mode and the state boundary: the out-of-scope option and
    the minimum label mass always, the option counts debiased and rotated where the generic prompt reads them."""
    served: dict[str, Any] = {"out_of_scope": settings.out_of_scope, "min_label_mass": settings.min_label_mass}
    if generic:
        served |= {
            "rotation_max_options": settings.rotation_max_options,
            "debias_max_options": settings.debias_max_options,
        }
    return served


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
    engine: DecisionEngine, requests: Sequence[DecisionRequest], limits: RequestLimits, *, route: str
) -> list[Decided]:
    """The requests on one engine (in a worker thread) in `evaluation_order`, sharing one memo: each held to its
    limits, then given its outcome or its adapter error (a token-budget refusal logged as alone); a runtime failure
    is raised."""
    decided = [Decided(uuid.uuid4().hex) for _ in requests]
    memo: AnswerMemo = {}  # a question asked again of the same state, in this mini-batch, is not evaluated again
    for i in evaluation_order(requests):
        t0 = time.perf_counter()
        try:
            limits.check(requests[i])
            decided[i].outcome = engine.decide(requests[i], memo)
        except RuntimeFailure:
            raise
        except AdapterError as e:
            decided[i].error = e
            if isinstance(e, TokenBudgetExceeded):
                log_rejection(decided[i].request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            continue
        decided[i].latency_ms = (time.perf_counter() - t0) * 1e3
    return decided


def evaluation_order(requests: Sequence[DecisionRequest]) -> list[int]:
    """The requests' indexes with those that share a state next to each other (states in order of first
    appearance), so a state is prefilled once and stays resident for the requests after it."""
    first_seen: dict[str, int] = {}
    keyed = [
        (first_seen.setdefault(json.dumps(r.state, ensure_ascii=False), len(first_seen)), i)
        for i, r in enumerate(requests)
    ]
    return [i for _, i in sorted(keyed)]


def cache_budget(settings: AdapterSettings, gguf: ModelMetadata, *, n_ctx: int) -> int:
    """DECISION_STATE_CACHE_MB, else a few full contexts' worth of KV state, capped."""
    if settings.state_cache_mb is not None:
        return settings.state_cache_mb * 1024 * 1024
    return min(DEFAULT_CACHE_CAP, DEFAULT_CACHE_CONTEXTS * gguf.kv_bytes_per_token() * n_ctx)
