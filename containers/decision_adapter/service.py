"""The loaded model behind the routes: loading it, its engines (one llama.cpp context each), admission, counters.

Capacity is a bounded permit count, as in text-generation-inference's router (admission.py):
`max_concurrency` contexts evaluate, `max_queue` requests may wait for one, and the next request waits
up to `admission_wait_s` for a permit, then is refused with 429 and a Retry-After estimated from the
requests ahead, instead of queueing without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from . import events
from .admission import Lane
from .calibration import calibration_in_force
from .contract import DEFAULT_MODEL_ALIAS
from .engine import DecisionEngine, DecisionOutcome
from .errors import RuntimeFailure, TokenBudgetExceeded, status_of
from .events import log_rejection
from .gguf_metadata import ModelMetadata, read_decision_metadata
from .identity import build_identity
from .model_files import find_gguf, verify_model
from .policy import Policy
from .prompting import Tokenize, make_scheme
from .runtime import LlamaRuntime
from .schemas import ChatCompletionRequest, DecisionRequest, RunIdentity
from .settings import AdapterSettings, RuntimeSettings
from .state_cache import StateCache

log = logging.getLogger("decision_adapter.service")
T = TypeVar("T")
DEFAULT_CACHE_CONTEXTS = 2  # default state-cache budget: this many full contexts' worth of KV...
DEFAULT_CACHE_CAP = 1 << 30  # ...but at most 1 GiB


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
        self.decisions = Lane(
            "decisions",
            engines,
            max_queue=settings.max_queue,
            wait_s=settings.admission_wait_s,
            retry_floor_s=settings.retry_after_s,
        )

    # -- loading
    @classmethod
    def load(cls, settings: AdapterSettings, runtime_settings: RuntimeSettings) -> ModelService:
        """Verify the GGUF, load it into `max_concurrency` contexts, build the engines. Blocking."""
        from llama_cpp import Llama

        path = find_gguf(settings.model_dir, runtime_settings.model)
        model = verify_model(path, settings.expected_model_sha256)
        policy = model.manifest.policy if model.manifest is not None else None
        if model.manifest is not None and policy is not None:  # refused before the weights load, as a checksum is
            policy.check_binding(model_sha256=model.sha256, calibration_sha256=model.manifest.calibration_sha256())
        vocab = Llama(str(path), vocab_only=True, verbose=False)  # metadata only: cheap
        meta: dict[str, str] = dict(vocab.metadata)
        vocab.close()
        gguf = ModelMetadata.read(meta)
        decision = read_decision_metadata(meta)  # refuse an unservable decision scheme before loading the weights
        kwargs = runtime_settings.llama_kwargs(gguf.context_length, contexts=settings.max_concurrency)
        llms = [Llama(str(path), logits_all=False, verbose=False, **kwargs) for _ in range(settings.max_concurrency)]
        scheme = make_scheme(
            gguf,
            decision,
            settings,
            bos_text=_token_text(llms[0], "bos"),
            eos_text=_token_text(llms[0], "eos"),
            tokenize=_tokenizer(llms[0]),
        )
        calibration = calibration_in_force(model.manifest, scheme)
        # One cache for all contexts: a snapshot restores into any context of the same model, and the budget
        # is the process's, not each context's.
        cache = StateCache(cache_budget(settings, gguf, n_ctx=int(llms[0].n_ctx())))
        engines = [
            DecisionEngine(
                LlamaRuntime(llm),
                scheme,
                model_sha256=model.sha256,
                calibration=calibration,
                cache=cache,
                reuse_states=settings.state_reuse,
                out_of_scope=settings.out_of_scope,
            )
            for llm in llms
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
            order_debias_mode=getattr(scheme, "debias_mode", None),  # the generic scheme's; a GGUF's own has none
            calibration=calibration.describe(),
            scheme=scheme.name,
            policy=policy.version if policy is not None else None,
        )
        return cls(settings=settings, engines=engines, llms=llms, identity=identity, policy=policy)

    # -- work
    async def run(self, fn: Callable[[DecisionEngine], T], *, request_id: str, route: str) -> T:
        """Run `fn` on a decision context once admitted (or refused with 429); failures are counted and logged."""
        try:
            return await self.decisions.run(fn, request_id=request_id, route=route)
        except TokenBudgetExceeded as e:
            log_rejection(request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            raise
        except RuntimeFailure as e:
            self.counters.errors += 1
            log_rejection(request_id, route, status_of(e), events.RUNTIME_FAILURE)
            raise

    async def decide(self, request: DecisionRequest, *, request_id: str, route: str) -> DecisionOutcome:
        outcome = await self.run(lambda engine: engine.decide(request), request_id=request_id, route=route)
        self.counters.decisions += 1
        return outcome

    async def chat(self, request: ChatCompletionRequest, *, request_id: str, route: str) -> dict[str, Any]:
        result = await self.run(lambda engine: engine.chat(request), request_id=request_id, route=route)
        result["model"] = self.model_name  # llama-cpp-python reports the GGUF's path on disk
        self.counters.chats += 1
        return result

    def metrics(self) -> dict[str, Any]:
        return {
            "decisions": self.counters.decisions,
            "chats": self.counters.chats,
            "rejected_overload": self.decisions.rejected,
            "errors": self.counters.errors,
            "admitted_now": self.decisions.admitted,
            "admission_limit": self.decisions.limit,
            "lanes": {"decisions": self.decisions.describe()},
            "state_cache": self.engines[0].cache.counters(),
        }

    def close(self) -> None:
        for llm in self.llms:
            llm.close()


def cache_budget(settings: AdapterSettings, gguf: ModelMetadata, *, n_ctx: int) -> int:
    """DECISION_STATE_CACHE_MB, else a few full contexts' worth of KV state, capped."""
    if settings.state_cache_mb is not None:
        return settings.state_cache_mb * 1024 * 1024
    return min(DEFAULT_CACHE_CAP, DEFAULT_CACHE_CONTEXTS * gguf.kv_bytes_per_token() * n_ctx)


def _tokenizer(llm: Any) -> Tokenize:
    def tokenize(text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    return tokenize


def _token_text(llm: Any, which: str) -> str:
    tid = llm.token_bos() if which == "bos" else llm.token_eos()
    if tid < 0:
        return ""
    return str(llm.detokenize([tid], special=True).decode("utf-8", errors="ignore"))
