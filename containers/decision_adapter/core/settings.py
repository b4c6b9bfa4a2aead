"""Settings, read once at start and passed explicitly: nothing deeper reads the environment.

Two sources, as on the stock llama.cpp SageMaker container:
- `DECISION_*` variables configure the adapter (limits, identity, logging);
- `SM_LLAMA_CPP_*` variables configure the runtime with the names operators already use on the
  stock DLC (`SM_LLAMA_CPP_CTX_SIZE=4096` is the server's `--ctx-size 4096`). Unknown ones are
  reported and ignored; invalid values stop start-up with a message naming the variable.
Both are pydantic models, one mechanism: every field has its default, bounds and description, and the
README's settings table is tested against them (tests/adapter/test_settings.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from decision_spec.answer_settings import AnswerSettings, shown, variable
from decision_spec.contract import MAX_CHOICE_OPTIONS, MAX_QUESTIONS, DebiasMode, StateBoundary, debias_mode
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

SM_PREFIX = "SM_LLAMA_CPP_"
DEFAULT_MAX_CTX = 8192  # enough for 255 described options; KV memory grows with it


class SettingsError(ValueError):
    """A setting is invalid; the message names the variable."""


class AdapterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DECISION_", frozen=True, extra="ignore")

    model_dir: Path = Field(
        Path("/opt/ml/model"), description="Where SageMaker unpacks model.tar.gz; searched two levels deep."
    )
    host: str = Field("0.0.0.0", description="Bind address.")  # noqa: S104 - SageMaker reaches the container on its own interface
    port: int = Field(
        8080,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("SAGEMAKER_BIND_TO_PORT", "DECISION_PORT"),
        description="Listening port; SageMaker's SAGEMAKER_BIND_TO_PORT wins.",
    )
    max_concurrency: int = Field(
        1, ge=1, le=16, description="Model contexts evaluating at once (each holds its own KV cache)."
    )
    max_queue: int = Field(
        16, ge=0, le=10_000, description="Requests that may wait for a context; past it, up to admission_wait_s."
    )
    chat_contexts: int = Field(
        0,
        ge=0,
        le=8,
        description="Model contexts for chat completions, beside the decision contexts: each holds its own KV cache "
        "and a share of the threads, and chat never runs on a decision context; 0 (the default, as the stacks "
        "deploy): chat is off (400) and decisions get every core.",
    )
    chat_max_queue: int = Field(4, ge=0, le=1000, description="Chat requests that may wait for a chat context.")
    admission_wait_s: float = Field(
        10.0,
        ge=0,
        le=55,
        description="How long a request that finds every permit taken (contexts and queue) may wait for one, first "
        "come first served, before its 429; 0: refused at once. SageMaker gives an invocation 60 s, queue included.",
    )
    retry_after_s: int = Field(
        1,
        ge=1,
        le=60,
        description="The least Retry-After (seconds) a 429 sends; the value is estimated from the requests ahead "
        "and recent service times, at most 60.",
    )
    max_body_bytes: int = Field(
        6 * 1024 * 1024, ge=1024, description="Larger bodies get 413 (SageMaker's own limit is 6 MB)."
    )
    api_key: SecretStr | None = Field(
        None, description="If set, require Authorization: Bearer <key> (for runs outside SageMaker)."
    )
    order_debias: DebiasMode = Field(
        "reverse",
        description="Option orders each question is read in: off (the given one), reverse (also true: the given and "
        "the reversed), rotations (every cyclic rotation, so each option sits in each slot once), adaptive (the "
        "rotations one by one, stopping once those unread can neither change the pick nor move a reported "
        "probability by more than DECISION_ADAPTIVE_TOLERANCE).",
    )
    state_boundary: StateBoundary = Field(
        "off",
        description="How the generic prompt marks the state as data: off; tagged (the state between two lines "
        "carrying a tag drawn from it, and a system line saying that nothing between them is an instruction); "
        "datamarked (tagged, every whitespace character of the state written as ˆ, and a system line naming the "
        "mark); sandwiched (tagged, and after the state a reminder that it was data and only the question after it "
        "is to be answered); spotlit (datamarked and sandwiched). Caller text never becomes control tokens either way.",
    )
    adaptive_tolerance: float = Field(
        0.34,
        gt=0.0,
        le=1.0,
        description="With adaptive, the most any reported probability (temperature applied) may differ from reading "
        "every rotation; the pick never differs. At 1/3 a question of 3 or 6 options may stop after 2 or 4 orders.",
    )
    rotation_max_options: int = Field(
        8,
        ge=2,
        le=26,
        description="With rotations or adaptive, questions of at most this many options are read in every rotation "
        "(one suffix per option); longer ones in the given and the reversed order.",
    )
    debias_max_options: int = Field(
        26,
        ge=2,
        le=255,
        description="Debias questions with at most this many options; longer lists (two-letter "
        "codes) are scored once, since their option list dominates the prompt and a second order doubles its cost.",
    )
    min_label_mass: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="Under a served policy, abstain where the label mass is below this (overrides the policy's own).",
    )
    out_of_scope: bool = Field(
        False,
        description="Offer every question a 'none of these' option and report its probability as x_out_of_scope "
        "(a question can opt in alone with x_out_of_scope: true).",
    )
    log_text: bool = Field(
        False, description="Log raw state and instruction text. Off: decision inputs can hold customer data."
    )
    state_reuse: bool = Field(
        True,
        description="Reuse evaluated states across requests (resident KV and the state cache). Off: every request "
        "computes its state from scratch (for comparisons).",
    )
    state_cache_mb: int | None = Field(
        None, ge=0, description="Memory for cached state prefixes; default derived from the model."
    )
    image_digest: str = Field("", description="The image digest, set by the stack, reported in run identity.")
    expected_model_sha256: str = Field(
        "", description="If set, the GGUF must have this sha256 (in addition to its manifest)."
    )
    instance_types: str = Field(
        "", description="Instance types the variant may run on, set by the stack, for run identity."
    )
    llama_cpp_build: str = Field("", description="llama.cpp build of the image's library, set by the Dockerfile.")
    model_name: str = Field("", description="Name served in /v1/models and responses; default the GGUF's general.name.")
    drain_timeout_s: int = Field(25, ge=0, le=300, description="On SIGTERM, how long in-flight requests may finish.")
    max_questions: int = Field(
        64,
        ge=1,
        le=MAX_QUESTIONS,
        description="Questions one request may ask, on every route (more: 413 before any work). Each question is "
        "read in one or more option orders: keep what one request costs within SageMaker's 60 s.",
    )
    max_options: int = Field(
        MAX_CHOICE_OPTIONS,
        ge=2,
        le=MAX_CHOICE_OPTIONS,
        description="Options one choice question may offer (more: 413).",
    )
    max_request_tokens: int | None = Field(
        None,
        ge=256,
        description="Tokens one request may have evaluated, its state and every question and option order together "
        "(more: 413, refused from its characters before it is tokenized where they cannot fit); default four "
        "contexts' worth.",
    )
    request_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Each request's time budget from its arrival, waiting for a context included: work stops between "
        "units past it with 504 deadline_exceeded (a JSON Lines body answers the records it finished and names the "
        "rest). SageMaker's real-time invocations end at 60 s; Batch Transform's InvocationsTimeoutInSeconds may "
        "allow up to 3600.",
    )
    max_body_records: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="Records one JSON Lines body may carry (more: 413 request_limit_exceeded before any is read); "
        "records that share a state are cheap, and the request's deadline bounds the rest.",
    )
    max_body_tokens: int | None = Field(
        None,
        ge=256,
        description="Tokens one JSON Lines body's text may need at the least, each distinct state once and every "
        "record's questions, counted from characters (more: 413 token_budget_exceeded before any work); default "
        "DECISION_MAX_REQUEST_TOKENS's.",
    )
    shared_endpoint: bool = Field(
        False,
        description="Callers who must not learn about each other's requests share this endpoint: answers leave out "
        "what tells whether a state was evaluated before (x_run.state_source, x_evaluated_tokens, x_timing_ms, "
        "OpenAI usage's cached tokens). Latency still tells it: turn DECISION_STATE_REUSE off too to hide that.",
    )

    @field_validator("order_debias", mode="before")
    @classmethod
    def _debias_mode(cls, raw: object) -> object:
        """true and false keep the meaning they always had (reverse, off)."""
        return debias_mode(raw) if isinstance(raw, str | bool) else raw


def _flag(raw: object) -> object:
    """A stock-server flag given with no value is on."""
    return True if isinstance(raw, str) and raw.strip() == "" else raw


Flag = Annotated[bool, BeforeValidator(_flag)]


class RuntimeSettings(BaseModel):
    """llama.cpp runtime parameters from SM_LLAMA_CPP_<alias> (names as on the stock container, whose flag is
    --<alias-in-lower-case-with-dashes>); `ignored`: the SM_LLAMA_CPP_* variables no field reads."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    model: str | None = Field(
        None, validation_alias="MODEL", description="A GGUF path, absolute or under the model dir."
    )
    n_ctx: int | None = Field(
        None,
        ge=256,
        le=1 << 20,
        validation_alias="CTX_SIZE",
        description="Context size; None: the model's training context, capped at DEFAULT_MAX_CTX.",
    )
    n_threads: int | None = Field(
        None, ge=1, le=1024, validation_alias="THREADS", description="Threads per context; None: the cores split."
    )
    n_threads_batch: int | None = Field(
        None, ge=1, le=1024, validation_alias="THREADS_BATCH", description="Prompt threads; None: as many as threads."
    )
    n_batch: int = Field(512, ge=1, le=1 << 16, validation_alias="BATCH_SIZE", description="Prefill batch size.")
    n_ubatch: int = Field(
        512, ge=1, le=1 << 16, validation_alias="UBATCH_SIZE", description="Physical batch size, at most n_batch."
    )
    n_gpu_layers: int = Field(
        0, ge=-1, le=100_000, validation_alias="N_GPU_LAYERS", description="Layers offloaded to the GPU."
    )
    main_gpu: int = Field(0, ge=0, le=64, validation_alias="MAIN_GPU", description="The GPU that holds the model.")
    flash_attn: Flag = Field(False, validation_alias="FLASH_ATTN", description="Flash attention.")
    use_mlock: Flag = Field(False, validation_alias="MLOCK", description="Lock the weights in memory.")
    no_mmap: Flag = Field(False, validation_alias="NO_MMAP", description="Read the weights instead of mapping them.")
    ignored: tuple[str, ...] = ()

    @property
    def use_mmap(self) -> bool:
        return not self.no_mmap

    def llama_kwargs(self, n_ctx_train: int, *, contexts: int = 1) -> dict[str, Any]:
        """Keyword arguments of each of `contexts` llama.cpp contexts. Threads: SM_LLAMA_CPP_THREADS, else the
        cores split across the contexts; batch threads as many unless SM_LLAMA_CPP_THREADS_BATCH says (the
        stock server's rule; llama-cpp-python's own defaults, half the host's CPUs for decoding and all of them
        for prompts, oversubscribe the cores as soon as two contexts evaluate at once)."""
        threads = self.n_threads or threads_per_context(contexts)
        return {
            "n_ctx": self.n_ctx or min(n_ctx_train, DEFAULT_MAX_CTX),
            "n_threads": threads,
            "n_threads_batch": self.n_threads_batch or threads,
            "n_batch": self.n_batch,
            "n_ubatch": min(self.n_ubatch, self.n_batch),
            "n_gpu_layers": self.n_gpu_layers,
            "main_gpu": self.main_gpu,
            "flash_attn": self.flash_attn,
            "use_mlock": self.use_mlock,
            "use_mmap": self.use_mmap,
        }


def available_cores() -> int:
    """The CPUs this process may run on (its affinity, which a container's cpuset narrows), not the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity outside Linux
        return os.cpu_count() or 1


def threads_per_context(contexts: int, cores: int | None = None) -> int:
    """The cores split evenly across the model contexts, at least one thread each. Contexts evaluate at the same
    time, and ggml's OpenMP workers spin while they wait for each other, so more threads than cores slows
    every context down many times over instead of sharing the cores."""
    if contexts < 1:
        raise ValueError("at least one context")
    return max(1, (available_cores() if cores is None else cores) // contexts)


def runtime_variables() -> dict[str, str]:
    """SM_LLAMA_CPP_* variable -> the RuntimeSettings field it sets."""
    return {
        SM_PREFIX + str(f.validation_alias): name
        for name, f in RuntimeSettings.model_fields.items()
        if isinstance(f.validation_alias, str)
    }


def runtime_from_env(env: Mapping[str, str] | None = None) -> RuntimeSettings:
    """RuntimeSettings from the SM_LLAMA_CPP_* variables; an invalid value raises SettingsError naming it."""
    env = os.environ if env is None else env
    known = runtime_variables()
    given = {key: env[key] for key in sorted(env) if key.startswith(SM_PREFIX)}
    values = {key[len(SM_PREFIX) :]: raw for key, raw in given.items() if key in known}
    try:
        return RuntimeSettings.model_validate({**values, "ignored": tuple(k for k in given if k not in known)})
    except ValidationError as e:
        first = e.errors()[0]
        key = SM_PREFIX + str(first["loc"][0])
        raise SettingsError(f"{key}={given.get(key)!r}: {first['msg']}") from None


def load_adapter_settings() -> AdapterSettings:
    """AdapterSettings from the environment, with an error that names the variable."""
    try:
        return AdapterSettings()
    except ValidationError as e:
        first = e.errors()[0]
        name = "DECISION_" + ".".join(str(p) for p in first["loc"]).upper()
        raise SettingsError(f"{name}: {first['msg']} (got {first.get('input')!r})") from None


def adopt_answer_settings(settings: AdapterSettings, recorded: AnswerSettings) -> AdapterSettings:
    """The settings with the artifact's recorded answer settings in force (the manifest's; what its evaluation and
    policy were measured under): one the environment leaves unset is taken from the artifact, one it sets to
    another value is refused with a SettingsError naming the variable and both values."""
    taken: dict[str, Any] = {}
    for name, value in recorded.recorded().items():
        own = getattr(settings, name)
        if name not in settings.model_fields_set:
            taken[name] = value
        elif own != value:
            raise SettingsError(
                f"{variable(name)}={shown(own)} contradicts the model artifact: its manifest.json records "
                f"{name} {shown(value)}, the setting its answers were evaluated under; unset {variable(name)} to serve "
                "the artifact's, or package and evaluate the model under the other value"
            )
    return settings.model_copy(update=taken) if taken else settings
