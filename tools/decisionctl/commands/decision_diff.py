"""decisionctl decision-diff: what a new model, calibration, policy, prompt or suite changes in the decisions, gated."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from decisionctl.commands.options import EXIT_FAILED, add_report_files, say, write_report
from decisionctl.review import decision_diff, summary
from decisionctl.review import record as records
from decisionctl.review import settings as review_settings

NAME = "decision-diff"
HELP = "compare two evaluation records of a suite: flips, accuracy, calibration, bands, actions; gates"


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


def gates(args: argparse.Namespace) -> decision_diff.Gates:
    found = review_settings.load(Path(args.cdk_json), args.env).gates if args.env else decision_diff.Gates()
    if args.max_accuracy_drop is not None:
        found = replace(found, max_accuracy_drop_points=args.max_accuracy_drop)
    if args.max_flips is not None:
        found = replace(found, max_flips=args.max_flips)
    if args.max_ece_rise is not None:
        found = replace(found, max_ece_rise=args.max_ece_rise)
    if args.band_bound is not None:
        found = replace(found, band_bound=args.band_bound == "on")
    return found


def run(args: argparse.Namespace) -> int:
    limits = gates(args)
    base_path, new_path = Path(args.base), Path(args.new)
    new = records.read(new_path)
    if not base_path.exists() and args.missing_base == "new":
        text = summary.new_record(new, title=args.title, base=str(base_path))
        write_report(args, text, {"base": None, "new": new_path.name, "failed": []})
        return 0
    try:
        report = decision_diff.diff(records.read(base_path), new)
    except records.RecordError as exc:
        say(str(exc))
        return EXIT_FAILED
    failed = decision_diff.failures(report, limits)
    write_report(args, summary.decision_diff(report, failed, title=args.title), {**report, "failed": failed})
    for f in failed:
        say(f"gate failed: {f}")
    return EXIT_FAILED if failed else 0
