"""Names of the adapter's log events and of the decision line's fields other parts read: written once here, read
by the adapter's writers (decision_adapter.request_log, handlers.py), by the stacks' metric filters
(stacks/observability.py: decision lines, overload rejections, runtime failures, answers per action;
stacks/decision_shift.py: the policy version, picks, label mass) and by decisionctl's log search."""

from __future__ import annotations

from typing import Final

from decision_spec.contract import Action

DECISION = "decision"  # one line per answered decision request
READY = "ready"  # the model is loaded and the routes answer
OVERLOAD_REJECTED = "overload_rejected"  # a 429: no permit left
TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"  # noqa: S105 - a 413: the request does not fit the context
DEADLINE_EXCEEDED = "deadline_exceeded"  # a 504: the request's time budget ran out (DECISION_REQUEST_TIMEOUT_S)
RUNTIME_FAILURE = "runtime_failure"  # a 500: llama.cpp failed on a well-formed request
MODEL_CHECKSUM_MISMATCH = "model_checksum_mismatch"  # start-up stops: the GGUF is not the one declared
MODEL_NOT_LOADED = "model_not_loaded"  # start-up stops: no model, or one that cannot be served as declared
POLICY_REFUSED = "policy_refused"  # start-up stops: the manifest's policy was measured on another model or calibration

# Fields of the `decision` line (handlers.py writes it) that metric filters read.
POLICY_FIELD: Final = "policy"  # the served policy's version (x_run.policy)
PICKED_FIELD: Final = "picked"  # {picked_key(question, option index): answers that picked it}, categorical answers
LABEL_MASS_SUM_FIELD: Final = "label_mass_sum"  # the label masses of the answers that report one, summed
LABEL_MASS_ANSWERS_FIELD: Final = "label_mass_answers"  # and how many answers those are
ANSWERS_FIELD: Final = "answers"  # the line's count of answers
INPUT_FLAGGED_FIELD: Final = "input_flagged"  # how many of them raised an input flag (x_input_flags)
INPUT_FLAGS_FIELD: Final = "input_flags"  # a question item's flags (names only, never the text that raised them)
# Under a served policy, the line's count of answers per action.
ACTION_COUNT_FIELDS: Final[dict[Action, str]] = {"automate": "automated", "review": "reviewed", "abstain": "abstained"}


def picked_key(options_sha256: str, option_index: int) -> str:
    """A `picked` entry's key: the question's x_options_sha256 and the place of the option picked."""
    return f"q{options_sha256}_{option_index}"
