"""Names of the adapter's log events, and the writer of the one-line record of a refused or failed request.

The stacks' metric filters select lines by these names (stacks/observability.py: decision lines and
overload rejections); tests/adapter/test_adapter_errors.py checks the two sides agree.
"""

from __future__ import annotations

import json
import logging

DECISION = "decision"  # one line per answered decision request
READY = "ready"  # the model is loaded and the routes answer
OVERLOAD_REJECTED = "overload_rejected"  # a 429: no permit left
TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"  # noqa: S105 - a 413: the request does not fit the context
RUNTIME_FAILURE = "runtime_failure"  # a 500: llama.cpp failed on a well-formed request
MODEL_CHECKSUM_MISMATCH = "model_checksum_mismatch"  # start-up stops: the GGUF is not the one declared
MODEL_NOT_LOADED = "model_not_loaded"  # start-up stops: no model, or one that cannot be served as declared
POLICY_REFUSED = "policy_refused"  # start-up stops: the manifest's policy was measured on another model or calibration

requests_log = logging.getLogger("decision_adapter.requests")


def log_rejection(request_id: str, route: str, status: int, event: str) -> None:
    """No request text: the line names the request, the route, the status and what happened."""
    requests_log.warning(json.dumps({"event": event, "request_id": request_id, "route": route, "status": status}))
