"""The adapter's request log: the logger the decision line is written to and the one-line record of a refused or
failed request (the event names are decision_spec.events')."""

from __future__ import annotations

import json
import logging

requests_log = logging.getLogger("decision_adapter.requests")


def log_rejection(request_id: str, route: str, status: int, event: str) -> None:
    """No request text: the line names the request, the route, the status and what happened."""
    requests_log.warning(json.dumps({"event": event, "request_id": request_id, "route": route, "status": status}))
