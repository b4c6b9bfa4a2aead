"""decisionctl outcomes: captured answers joined with the final answers people gave, as labeled cases."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.certification import manifests
from decisionctl.commands.options import EXIT_FAILED, say
from decisionctl.traffic import capture, joins
from decisionctl.traffic.report import write_report

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


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    policy = manifests.read_policy(Path(args.policy)) if args.policy else None
    try:
        found = capture.read_sources(args.capture, s3_client=lambda: _s3(args.region), variant=args.variant)
        rows = joins.read_outcomes(Path(args.outcomes))
    except (capture.CaptureError, joins.OutcomesError) as exc:
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
    result = joins.join(found.answers, rows)
    if not result.joined:
        say(f"no outcome row names a captured answer ({len(rows.rows)} rows, {len(found.answers)} answers)")
        _say_unmatched(result, rows)
        return EXIT_FAILED
    written = joins.write_join(result, out)
    report = write_report(out, found=found, rows=rows, result=result, written=written, policy=policy)
    print(tables.outcomes(report))
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
        say(f"{out / joins.EVALUATE_DIR} not written: {written['evaluate_refused']}")
    print(f"wrote {written['cases']}, {out / joins.REPORT}")
    limit = args.max_reversal_rate
    over = [q for q, r in report["questions"].items() if limit is not None and (r["reversal_rate"] or 0.0) > limit]
    if over:
        say(f"reversal rate above --max-reversal-rate {limit} for: {', '.join(over)}")
        return EXIT_FAILED
    return 0


def _s3(region: str | None) -> Any:
    import boto3

    return boto3.client("s3", region_name=region)


def _say_unmatched(result: joins.Join, rows: joins.OutcomeRead) -> None:
    for reason, n in sorted(result.unmatched.items()):
        say(f"{n} outcome rows not joined: {reason} (e.g. {', '.join(result.examples[reason])})")
    if rows.invalid:
        say(f"{len(rows.invalid)} outcome rows invalid, e.g. {'; '.join(rows.invalid[:3])}")
