"""Loading the model behind the routes: the GGUF found and verified against its manifest, the answer settings and
policy the manifest records put in force, the decision and chat contexts, the prompt scheme, the calibration, the
engines and the run identity, built into the model service (service.py)."""

from __future__ import annotations

from typing import Any

from decision_spec.gguf_metadata import ModelMetadata, read_decision_metadata
from decision_spec.manifest import find_gguf, verify_model
from decision_spec.memory import state_cache_bytes

from .calibration import calibration_in_force
from .core.settings import AdapterSettings, RuntimeSettings, adopt_answer_settings
from .engine import DecisionEngine
from .identity import build_identity
from .prompting import (
    debias_mode_served,
    debias_tolerance_served,
    make_scheme,
    option_labels_served,
    state_boundary_served,
)
from .runtime import LlamaRuntime
from .service import ModelService
from .state_cache import StateCache


def load_service(settings: AdapterSettings, runtime_settings: RuntimeSettings) -> ModelService:
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
        policy.check_option_labels(option_labels_served(decision, settings))
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
    calibration = calibration_in_force(
        model.manifest.calibration if model.manifest is not None else None,
        model_sha256=model.sha256,
        template=scheme.name,
        declared=scheme.declared_temperatures,
    )
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
        served=served_answer_settings(
            settings, generic=served_boundary is not None, policy_floor=policy.min_label_mass if policy else None
        ),
    )
    return ModelService(
        settings=settings,
        engines=engines,
        llms=llms + chat_llms,
        identity=identity,
        policy=policy,
        chat_runtimes=[LlamaRuntime(llm) for llm in chat_llms],
    )


def served_answer_settings(
    settings: AdapterSettings, *, generic: bool, policy_floor: float | None = None
) -> dict[str, Any]:
    """The answer settings x_run reports beside the debias mode and the state boundary: the out-of-scope option and
    the minimum label mass that acts (DECISION_MIN_LABEL_MASS, else the policy's floor; None: no floor) always, the
    option labels and the option counts debiased and rotated where the generic prompt reads them."""
    floor = settings.min_label_mass if settings.min_label_mass is not None else policy_floor
    served: dict[str, Any] = {"out_of_scope": settings.out_of_scope, "min_label_mass": floor}
    if generic:
        served |= {
            "option_labels": settings.option_labels,
            "rotation_max_options": settings.rotation_max_options,
            "debias_max_options": settings.debias_max_options,
        }
    return served


def cache_budget(settings: AdapterSettings, gguf: ModelMetadata, *, n_ctx: int) -> int:
    """DECISION_STATE_CACHE_MB, else a few full contexts' worth of KV state, capped (memory.state_cache_bytes)."""
    return state_cache_bytes(settings.state_cache_mb, gguf.kv_bytes_per_token(), n_ctx=n_ctx)
