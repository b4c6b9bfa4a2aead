"""decisionctl decision-diff: what a new model, calibration, policy, prompt or suite changes in the decisions, gated."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl.commands.options import add_report_files, say, write_report
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.review.decision_diff import review_records


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Compare two evaluation records (record-evaluation) of the same suite, matched by case id: answers that "
        "flip (with both distributions), accuracy, ECE and Brier, each policy band's automated share, errors and "
        "error bound on the suite, and action shares. Prints Markdown (for a job summary); --json writes the full "
        "report. Exits 1 when a gate fails: the gates come from cdk.json with --env, and each flag overrides one."
    )
    p.add_argument("base", help="the record of what is served now (e.g. the base branch's)")
    p.add_argument("new", help="the record of the candidate")
    p.add_argument("--env", help="read the gates from environments.<env>.evaluation.gates in --cdk-json")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    p.add_argument("--max-accuracy-drop", type=float, metavar="POINTS", help="fail if accuracy falls more")
    p.add_argument("--max-flips", type=int, metavar="K", help="fail if more answers flip")
    p.add_argument("--max-ece-rise", type=float, metavar="X", help="fail if ECE rises more")
    p.add_argument(
        "--band-bound",
        choices=("on", "off"),
        help="fail when a band's error bound on the suite goes past its E, or is past it with more errors",
    )
    p.add_argument(
        "--missing-base",
        choices=("fail", "new"),
        default="fail",
        help="when BASE does not exist: fail (default), or report NEW as new with no gate",
    )
    p.add_argument("--title", default="Decision diff", help="the Markdown heading")
    add_report_files(p)


def run(args: argparse.Namespace) -> int:
    overrides = {
        name: value
        for name, value in (
            ("max_accuracy_drop_points", args.max_accuracy_drop),
            ("max_flips", args.max_flips),
            ("max_ece_rise", args.max_ece_rise),
            ("band_bound", None if args.band_bound is None else args.band_bound == "on"),
        )
        if value is not None
    }
    review = review_records(
        Path(args.base),
        Path(args.new),
        env=args.env,
        cdk_json=Path(args.cdk_json),
        overrides=overrides,
        missing_base_is_new=args.missing_base == "new",
        title=args.title,
    )
    if review.refused is not None:
        say(review.refused)
        return EXIT_FAILED
    write_report(args, review.markdown, review.report)
    for f in review.failed:
        say(f"gate failed: {f}")
    return EXIT_FAILED if review.failed else 0
