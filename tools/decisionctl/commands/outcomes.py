"""decisionctl outcomes: captured answers joined with the final answers people gave, as labeled cases."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from decision_adapter.manifest import read_manifest
from decision_adapter.policy import POLICY_SCHEMA, Policy

from decisionctl import band_check, capture, render
from decisionctl import outcomes as outcomes_mod
from decisionctl.commands.options import EXIT_FAILED, say

NAME = "outcomes"
HELP = "join captured answers with what people decided: labeled cases, reversal rates, band error on traffic"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Read SageMaker data capture (output-only JSON Lines: local files, directories or s3:// prefixes) and an "
        "outcomes file (CSV or JSON Lines of request_id, question_id, final_answer), join them, and write "
        "OUT/cases.jsonl (labeled cases without text) with OUT/evaluate/ (the captured answers as evaluate's saved "
        "predictions), so `decisionctl evaluate OUT/cases.jsonl --out OUT/evaluate` re-certifies on traffic "
        "without sending anything. Reports per question the human-reversal rate of automated answers and, with "
        "--policy, each automate band's error on traffic against its promised bound. Writes OUT/outcomes.json."
    )
    p.add_argument("capture", nargs="+", help="capture files, directories of .jsonl files, or s3:// prefixes")
    p.add_argument("--outcomes", required=True, metavar="FILE", help="the final answers: .csv or JSON Lines")
    p.add_argument("--variant", help="read only this variant's capture (<variant>/yyyy/mm/dd/hh/ in the path)")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="a manifest.json with a policy block, or a policy block alone: measure its bands",
    )
    p.add_argument(
        "--max-reversal-rate",
        type=float,
        metavar="R",
        help="exit 1 if any question's reversal rate of automated answers is above R (a monitoring gate)",
    )
    p.add_argument("--region", help="AWS region of the capture bucket (default: from the AWS configuration)")
    p.add_argument("--out", default="outcomes", metavar="DIR", help="output directory (default ./outcomes)")


def load_policy(path: Path) -> Policy:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("schema") == POLICY_SCHEMA:
        return Policy.model_validate(data)
    policy = read_manifest(path).policy
    if policy is None:
        raise ValueError(f"{path} holds no policy block; write one with `decisionctl evaluate --write-policy`")
    return policy


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    policy = load_policy(Path(args.policy)) if args.policy else None
    try:
        found = capture.read_sources(args.capture, s3_client=lambda: _s3(args.region), variant=args.variant)
        rows = outcomes_mod.read_outcomes(Path(args.outcomes))
    except (capture.CaptureError, outcomes_mod.OutcomesError) as exc:
        say(str(exc))
        return EXIT_FAILED
    variants = found.variants()
    if len(variants) > 1:
        say(
            "the capture holds several variants ("
            + ", ".join(f"{v}: {n}" for v, n in sorted(variants.items()))
            + "): outcomes are about one; pass --variant NAME"
        )
        return EXIT_FAILED
    result = outcomes_mod.join(found.answers, rows)
    if not result.joined:
        say(f"no outcome row names a captured answer ({len(rows.rows)} rows, {len(found.answers)} answers)")
        _say_unmatched(result, rows)
        return EXIT_FAILED
    written = outcomes_mod.write_join(result, out)
    report: dict[str, Any] = {
        "capture": found.summary(),
        "outcome_rows": len(rows.rows) + len(rows.invalid),
        "invalid_rows": rows.invalid,
        "superseded_rows": result.superseded,
        "joined": len(result.joined),
        "unmatched": dict(sorted(result.unmatched.items())),
        "unmatched_examples": result.examples,
        "captured_without_outcome": result.without_outcome,
        "questions": outcomes_mod.reversal_report(result.joined),
        "written": written,
    }
    if policy is not None:
        report["bands"] = band_check.band_report(result.joined, policy)
    (out / outcomes_mod.REPORT).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(render_outcomes(report))
    if found.input_captured:
        say(
            f"{found.input_captured} capture records also hold the request (its text): the capture is not output-only; "
            "it was not read"
        )
    _say_unmatched(result, rows)
    if written["evaluate"]:
        say(
            f"re-certify on these cases with: decisionctl evaluate {written['cases']} --out {written['evaluate']} "
            "(--url or --sagemaker-endpoint of the endpoint they came from; nothing is sent) [--write-policy MANIFEST]"
        )
    else:
        say(f"{out / outcomes_mod.EVALUATE_DIR} not written: {written['evaluate_refused']}")
    print(f"wrote {written['cases']}, {out / outcomes_mod.REPORT}")
    limit = args.max_reversal_rate
    over = [q for q, r in report["questions"].items() if limit is not None and (r["reversal_rate"] or 0.0) > limit]
    if over:
        say(f"reversal rate above --max-reversal-rate {limit} for: {', '.join(over)}")
        return EXIT_FAILED
    return 0


def _s3(region: str | None) -> Any:
    import boto3

    return boto3.client("s3", region_name=region)


def _say_unmatched(result: outcomes_mod.Join, rows: outcomes_mod.OutcomeRead) -> None:
    for reason, n in sorted(result.unmatched.items()):
        say(f"{n} outcome rows not joined: {reason} (e.g. {', '.join(result.examples[reason])})")
    if rows.invalid:
        say(f"{len(rows.invalid)} outcome rows invalid, e.g. {'; '.join(rows.invalid[:3])}")


def render_outcomes(report: dict[str, Any]) -> str:
    rows = []
    for qid, q in report["questions"].items():
        review = q["actions"].get("review", {"answers": 0, "changed": 0})
        rows.append(
            [
                qid,
                q["type"],
                q["joined"],
                render.pct(q["agreed"] / q["joined"]),
                q["automated"],
                q["reversed"],
                render.pct(q["reversal_rate"]),
                f"{review['changed']}/{review['answers']}",
            ]
        )
    headers = ["question", "type", "joined", "agreed", "automated", "reversed", "reversal rate", "review changed"]
    parts = [
        f"{report['joined']} decisions joined from {report['capture']['answers']} captured answers and "
        f"{report['outcome_rows']} outcome rows",
        render.table(headers, rows),
    ]
    bands = report.get("bands")
    if bands:
        parts.append(f"\nAutomate bands of policy {bands['policy']} on this traffic:")
        band_rows = []
        for key, b in bands["bands"].items():
            promise = b["promised"]
            verdict = "no bound recorded"
            if promise is not None:
                verdict = f"<= {render.pct(promise['max_error'])}: " + ("EXCEEDED" if b["exceeded"] else "consistent")
                verdict += f" (p {render.num(b['p_value'])})"
            band_rows.append(
                [key, ", ".join(b["question_ids"]), b["automated"], b["errors"], render.pct(b["error"]), verdict]
            )
        parts.append(render.table(["band", "questions", "automated", "reversed", "error", "promised"], band_rows))
    return "\n".join(parts)
