"""Settings, read once at start and passed explicitly: nothing deeper reads the environment.

Two sources, as on the stock llama.cpp SageMaker container:
- `DECISION_*` variables configure the adapter (limits, identity, logging): the registry's settings
  (decision_spec/decision_settings.py, each with its default, bounds and kind once), read from the environment;
- `SM_LLAMA_CPP_*` variables configure the runtime with the names operators already use on the
  stock DLC (`SM_LLAMA_CPP_CTX_SIZE=4096` is the server's `--ctx-size 4096`). Unknown ones are
  reported and ignored; invalid values stop start-up with a message naming the variable.
Both are pydantic models, one mechanism: every field has its default, bounds and description, and the
README's settings table is tested against them (tests/adapter/test_settings.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any

from decision_spec.answer_settings import ENV_PREFIX, AnswerSettings, shown, variable
from decision_spec.decision_settings import DecisionSettings
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

SM_PREFIX = "SM_LLAMA_CPP_"
DEFAULT_MAX_CTX = 8192  # enough for 255 described options; KV memory grows with it


class SettingsError(ValueError):
    """A setting is invalid; the message names the variable."""


class AdapterSettings(DecisionSettings, BaseSettings):
    """The registry's settings (decision_spec.decision_settings: each one's default, bounds, description and kind)
    read from `DECISION_*` variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="ignore")


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
        name = ENV_PREFIX + ".".join(str(p) for p in first["loc"]).upper()
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
