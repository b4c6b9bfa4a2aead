"""OUT/outcomes.json: what the join read and matched, each question's reversal rate, and a policy's bands on traffic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decision_spec.policy import Policy

from decisionctl.traffic import band_check, joins
from decisionctl.traffic.capture import CaptureRead


def write_outcomes(
    out: Path,
    *,
    found: CaptureRead,
    rows: joins.OutcomeRead,
    result: joins.Join,
    written: dict[str, Any],
    policy: Policy | None,
) -> dict[str, Any]:
    """The report of a join `write_join` wrote (`written`), written to OUT/outcomes.json and returned."""
    report: dict[str, Any] = {
        "capture": found.summary(),
        "outcome_rows": len(rows.rows) + len(rows.invalid),
        "invalid_rows": rows.invalid,
        "superseded_rows": result.superseded,
        "joined": len(result.joined),
        "unmatched": dict(sorted(result.unmatched.items())),
        "unmatched_examples": result.examples,
        "captured_without_outcome": result.without_outcome,
        "questions": joins.reversal_report(result.joined),
        "written": written,
    }
    if policy is not None:
        report["bands"] = band_check.band_report(result.joined, policy)
    (out / joins.REPORT).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return report
