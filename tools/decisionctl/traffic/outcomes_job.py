"""The outcomes use case: captured answers joined with the final answers people gave, written as labeled cases and
outcomes.json (write_outcomes: reversal rates, a policy's bands on traffic); the text to print and the exit status
returned."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.manifest import read_manifest
from decision_spec.policy import POLICY_SCHEMA, Policy

from decisionctl import tables
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.traffic import capture, joins
from decisionctl.traffic.band_check import band_report
from decisionctl.traffic.capture import CaptureRead


@dataclass(frozen=True)
class OutcomesOptions:
    """What `decisionctl outcomes` was asked, as plain values (its arguments' names)."""

    capture: list[str]
    outcomes: str
    variant: str | None = None
    policy: str | None = None
    max_reversal_rate: float | None = None
    region: str | None = None
    out: str = "outcomes"


@dataclass(frozen=True)
class OutcomesResult:
    text: str
    status: int


def _s3(region: str | None) -> Any:
    import boto3

    return boto3.client("s3", region_name=region)


def _say_unmatched(result: joins.Join, rows: joins.OutcomeRead, say: Callable[[str], None]) -> None:
    for reason, n in sorted(result.unmatched.items()):
        say(f"{n} outcome rows not joined: {reason} (e.g. {', '.join(result.examples[reason])})")
    if rows.invalid:
        say(f"{len(rows.invalid)} outcome rows invalid, e.g. {'; '.join(rows.invalid[:3])}")


def label_outcomes(o: OutcomesOptions, *, say: Callable[[str], None]) -> OutcomesResult:
    """Join the capture with the outcomes, write OUT/cases.jsonl, OUT/evaluate/ and OUT/outcomes.json; `say` hears
    what was not joined and what to run next."""
    out = Path(o.out)
    policy = read_policy(Path(o.policy)) if o.policy else None
    try:
        found = capture.read_sources(o.capture, s3_client=lambda: _s3(o.region), variant=o.variant)
        rows = joins.read_outcomes(Path(o.outcomes))
    except (capture.CaptureError, joins.OutcomesError) as exc:
        say(str(exc))
        return OutcomesResult("", EXIT_FAILED)
    variants = found.variants()
    if len(variants) > 1:
        say(
            "the capture holds several variants ("
            + ", ".join(f"{v}: {n}" for v, n in sorted(variants.items()))
            + "): outcomes are about one; pass --variant NAME"
        )
        return OutcomesResult("", EXIT_FAILED)
    result = joins.join(found.answers, rows)
    if not result.joined:
        say(f"no outcome row names a captured answer ({len(rows.rows)} rows, {len(found.answers)} answers)")
        _say_unmatched(result, rows, say)
        return OutcomesResult("", EXIT_FAILED)
    written = joins.write_join(result, out)
    report = write_outcomes(out, found=found, rows=rows, result=result, written=written, policy=policy)
    text = tables.outcomes(report) + "\n"
    if found.input_captured:
        say(
            f"{found.input_captured} capture records also hold the request (its text): the capture is not output-only; "
            "it was not read"
        )
    _say_unmatched(result, rows, say)
    if written["evaluate"]:
        say(
            f"re-certify on these cases with: decisionctl evaluate {written['cases']} --out {written['evaluate']} "
            "(--url or --sagemaker-endpoint of the endpoint they came from; nothing is sent) [--write-policy MANIFEST]"
        )
    else:
        say(f"{out / joins.EVALUATE_DIR} not written: {written['evaluate_refused']}")
    text += f"wrote {written['cases']}, {out / joins.REPORT}\n"
    limit = o.max_reversal_rate
    over = [q for q, r in report["questions"].items() if limit is not None and (r["reversal_rate"] or 0.0) > limit]
    if over:
        say(f"reversal rate above --max-reversal-rate {limit} for: {', '.join(over)}")
        return OutcomesResult(text, EXIT_FAILED)
    return OutcomesResult(text, 0)


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
        report["bands"] = band_report(result.joined, policy)
    (out / joins.REPORT).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return report


def read_policy(path: Path) -> Policy:
    """A policy block alone, or the policy of a manifest.json."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("schema") == POLICY_SCHEMA:
        return Policy.model_validate(data)
    policy = read_manifest(path).policy
    if policy is None:
        raise ValueError(f"{path} holds no policy block; write one with `decisionctl evaluate --write-policy`")
    return policy
