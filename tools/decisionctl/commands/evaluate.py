"""decisionctl evaluate: measure accuracy and calibration on labeled cases, certify per-question thresholds at
an error the user can afford, optionally fit temperatures or write the certified bands into a manifest as the
policy the adapter serves."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from decisionctl.certification.evaluate_cases import CasesToScore, PolicyWrite, TemperatureFit, Thresholds, evaluate
from decisionctl.commands import options
from decisionctl.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED

MAX_ERROR = "error allowed among automated answers; the policy's automate thresholds are certified to it (0.05)"
CONFIDENCE = "probability that the certified bounds hold out of sample (0.95)"
TARGET_ACCURACY = "accuracy of the point-estimate recommendation (reported, not certified, not written) (0.9)"
MIN_SUPPORT = "fewest cases a recommended threshold must cover, and a threshold the cases-needed estimate uses (5)"
REVIEW_ACCURACY = "accuracy the review band below the automate threshold must reach (certified at --confidence) (0.5)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Score a labeled JSONL file against an endpoint (resumable), report accuracy, "
        "macro-F1, Brier, ECE and a coverage table, certify per question and per type the thresholds whose "
        "automated answers have error <= --max-error with probability --confidence out of sample, and write "
        "results.json, reliability.png, confidence_hist.png and automation/<band>.png into --out. Without an "
        "endpoint it reports on the predictions --out already holds (outcomes' evaluate/ directory), sending nothing."
    )
    cases = "labeled JSONL (default: the shipped example set)"
    p.add_argument("cases", nargs="?", default=str(options.shipped("examples.jsonl")), help=cases)
    options.add_target(p, required=False)
    out = "output directory (default ./evaluate; evaluation/ holds the committed suites and records)"
    p.add_argument("--out", default="evaluate", metavar="DIR", help=out)
    p.add_argument("--max-error", type=float, default=0.05, metavar="E", help=MAX_ERROR)
    p.add_argument("--confidence", type=float, default=0.95, metavar="C", help=CONFIDENCE)
    p.add_argument("--target-accuracy", type=float, default=0.9, help=TARGET_ACCURACY)
    p.add_argument("--min-support", type=int, default=5, help=MIN_SUPPORT)
    p.add_argument("--review-accuracy", type=float, default=0.5, help=REVIEW_ACCURACY)
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    p.add_argument("--restart", action="store_true", help="forget earlier predictions in --out and score everything")
    options.add_retry(p)
    p.add_argument(
        "--fit-calibration",
        action="store_true",
        help="fit per-type temperature (yes/no: with an intercept), report held-out ECE",
    )
    p.add_argument("--holdout", type=float, default=0.4, help="held-out fraction per type for --fit-calibration (0.4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit/held-out split (0)")
    p.add_argument(
        "--manifest",
        metavar="PATH",
        help="write the fitted temperatures into this manifest.json "
        "(only if they lower held-out ECE); default: print the calibration JSON",
    )
    p.add_argument(
        "--write-policy",
        metavar="MANIFEST",
        help="write the certified bands (per question and per type) into this manifest.json as its policy block, "
        "bound to the model and calibration the cases were scored under (refused if the endpoint served others)",
    )
    options.add_review_input_flags(p)


def run(args: argparse.Namespace) -> int:
    offline = args.url is None and args.sagemaker_endpoint is None
    connect = None if offline else partial(options.sender, args, max_connections=args.concurrency)
    retry = options.retry_policy(args)
    to_score = CasesToScore(Path(args.cases), Path(args.out), connect, args.concurrency, args.restart, retry)
    limits = Thresholds(args.max_error, args.confidence, args.target_accuracy, args.min_support, args.review_accuracy)
    manifest = None if args.manifest is None else Path(args.manifest)
    fit = TemperatureFit(args.holdout, args.seed, manifest) if args.fit_calibration else None
    policy = PolicyWrite(Path(args.write_policy), args.review_input_flags) if args.write_policy else None
    result = evaluate(to_score, limits, fit=fit, policy=policy, say=options.say)
    print(result.text, end="")
    return EXIT_INTERRUPTED if result.interrupted else EXIT_FAILED if result.failed else 0
