"""How a model is asked: the scheme interface (base), the generic scheme, and the schemes a GGUF declares.

`make_scheme` picks one: the scheme the GGUF's decision metadata declares (gguf.py, with its systemone
template in systemone.py), else this project's generic prompt in the model's chat template (generic.py).
"""

from __future__ import annotations

from decision_spec.contract import DebiasMode, OptionLabels, StateBoundary
from decision_spec.gguf_metadata import DecisionMetadata, ModelMetadata

from ..core.settings import AdapterSettings
from .base import PassSpec, PromptScheme
from .generic import GenericScheme, build_template
from .gguf import declared_scheme
from .sandbox import Tokenize

__all__ = [
    "PassSpec",
    "PromptScheme",
    "Tokenize",
    "debias_mode_served",
    "debias_tolerance_served",
    "make_scheme",
    "option_labels_served",
    "state_boundary_served",
]


def debias_mode_served(decision: DecisionMetadata | None, settings: AdapterSettings) -> DebiasMode | None:
    """The order-debiasing mode of the scheme `make_scheme` picks, known before the weights load: the
    generic scheme's setting; none for a scheme the GGUF declares (it reads its own passes)."""
    return None if decision is not None else settings.order_debias


def debias_tolerance_served(decision: DecisionMetadata | None, settings: AdapterSettings) -> float | None:
    """The adaptive mode's tolerance where the scheme `make_scheme` picks reads adaptively; else None."""
    return settings.adaptive_tolerance if debias_mode_served(decision, settings) == "adaptive" else None


def state_boundary_served(decision: DecisionMetadata | None, settings: AdapterSettings) -> StateBoundary | None:
    """How the state is marked as data in the prompt `make_scheme` picks: the generic scheme's setting; none for a
    scheme the GGUF declares (its own template writes the prompt; caller text is still never read as control tokens)."""
    return None if decision is not None else settings.state_boundary


def option_labels_served(decision: DecisionMetadata | None, settings: AdapterSettings) -> OptionLabels | None:
    """What the answer names an option by in the prompt `make_scheme` picks: the generic scheme's setting; none for
    a scheme the GGUF declares (its own labels)."""
    return None if decision is not None else settings.option_labels


def make_scheme(
    model: ModelMetadata,
    decision: DecisionMetadata | None,
    settings: AdapterSettings,
    *,
    bos_text: str,
    eos_text: str,
    tokenize: Tokenize,
) -> PromptScheme:
    """The scheme the GGUF declares (its decision metadata wins), else the generic prompt. Raises
    InvalidDecisionMetadata where a declared scheme's template or labels cannot be used."""
    if decision is not None:
        return declared_scheme(
            decision,
            bos_text=bos_text,
            eos_text=eos_text,
            add_bos=model.add_bos_token,
            tokenize=tokenize,
            cache_size=2 * settings.max_concurrency,
        )
    template = build_template(
        model.chat_template,
        bos_text=bos_text,
        eos_text=eos_text,
        add_bos=model.add_bos_token,
        boundary=settings.state_boundary,
        option_labels=settings.option_labels,
    )
    return GenericScheme(
        template,
        debias_mode=settings.order_debias,
        debias_max_options=settings.debias_max_options,
        rotation_max_options=settings.rotation_max_options,
        adaptive_tolerance=settings.adaptive_tolerance,
    )
