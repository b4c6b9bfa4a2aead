"""What deciding gives back before it takes the contract's shape: each question's scored options, a request's
outcome, and a JSON Lines record's outcome or error (the engine makes them, the service returns them, the handlers
answer from them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from decision_spec.contract import InputFlag

from .core.errors import AdapterError


@dataclass(frozen=True)
class Scored:
    """One question's answer: its option keys and their probabilities, before it takes the contract's shape."""

    keys: list[str]
    probs: list[float]
    options_sha256: str
    suffix_tokens: int
    orders: int
    label_mass: float | None = None  # mean over the orders of P(an offered label), whole vocabulary, in (0, 1]
    out_of_scope: float | None = None  # P("none of these") among all offered options; None where not offered
    orders_read: list[str] = field(default_factory=list)  # signals.order_name of each order read, in reading order
    slot_probabilities: list[list[float]] = field(default_factory=list)  # per order read: raw, per slot
    input_flags: list[InputFlag] = field(default_factory=list)  # what its caller text raised (input_flags.py)


@dataclass
class DecisionOutcome:
    answers: dict[str, Scored]
    input_tokens: int
    evaluated_tokens: int
    state_source: str  # "resident" | "cache" | "computed"
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class Decided:
    """One decision of a mini-batch: its request id, and its outcome and latency or the adapter error it got."""

    request_id: str
    outcome: DecisionOutcome | None = None
    error: AdapterError | None = None
    latency_ms: float = 0.0
