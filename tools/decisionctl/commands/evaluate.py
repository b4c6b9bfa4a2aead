"""decisionctl evaluate: measure accuracy and calibration on labeled cases, certify per-question thresholds at
an error the user can afford, optionally fit temperatures or write the certified bands into a manifest as the
policy the adapter serves."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from decision_adapter.contract import INPUT_FLAGS

from decisionctl import tables
from decisionctl.certification import bands, manifests, policies
from decisionctl.commands.options import EXIT_FAILED, add_retry, add_target, retry_policy, say, shipped, transport
from decisionctl.evaluation import scoring
from decisionctl.evaluation.cases import Case, CaseError, load_cases

NAME = "evaluate"
HELP = "measure accuracy and calibration on labeled cases"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Score a labeled JSONL file against an endpoint (resumable), report accuracy, "
        "macro-F1, Brier, ECE and a coverage table, certify per question and per type the thresholds whose "
        "automated answers have error <= --max-error with probability --confidence out of sample, and write "
        "results.json, reliability.png, confidence_hist.png and automation/<band>.png into --out. Without an "
        "endpoint it reports on the predictions --out already holds (outcomes' evaluate/ directory), sending nothing."
    )
    p.add_argument(
        "cases",
        nargs="?",
        default=str(shipped("examples.jsonl")),
        help="labeled JSONL (default: the shipped example set)",
    )
    add_target(p, required=False)
    p.add_argument(
        "--out",
        default="evaluate",
        metavar="DIR",
        help="output directory (default ./evaluate; evaluation/ holds the committed suites and records)",
    )
    p.add_argument(
        "--max-error",
        type=float,
        default=0.05,
        metavar="E",
        help="error allowed among automated answers; the policy's automate thresholds are certified to it (0.05)",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="C",
        help="probability that the certified bounds hold out of sample (0.95)",
    )
    p.add_argument(
        "--target-accuracy",
        type=float,
        default=0.9,
        help="accuracy of the point-estimate recommendation (reported, not certified, not written) (0.9)",
    )
    p.add_argument(
        "--min-support",
        type=int,
        default=5,
        help="fewest cases a recommended threshold must cover, and a threshold the cases-needed estimate uses (5)",
    )
    p.add_argument(
        "--review-accuracy",
        type=float,
        default=0.5,
        help="accuracy the review band below the automate threshold must reach (certified at --confidence) (0.5)",
    )
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    p.add_argument("--restart", action="store_true", help="forget earlier predictions in --out and score everything")
    add_retry(p)
    p.add_argument("--fit-calibration", action="store_true", help="fit per-type temperature, report held-out ECE")
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
    p.add_argument(
        "--review-input-flags",
        metavar="FLAGS",
        type=input_flags_arg,
        help="with --write-policy: send answers raising these input flags to review whatever their confidence, "
        f"comma-separated ({', '.join(INPUT_FLAGS)}), or 'none'; default: as the previous policy (docs/security.md)",
    )


def run(args: argparse.Namespace) -> int:
    cases_path, out = Path(args.cases), Path(args.out)
    refused = _refused_arguments(args)
    if refused:
        say(refused)
        return EXIT_FAILED
    try:
        cases = load_cases(cases_path)
    except CaseError as exc:
        say(f"{cases_path}: {exc}")
        return EXIT_FAILED
    scored = _score(args, cases, out)
    if scored is None:
        return EXIT_FAILED
    say(f"{scored.sent} cases sent, {scored.skipped} already scored in {out / scoring.PREDICTIONS}")
    if scored.interrupted:
        say("interrupted: run the same command again to score the rest")
        return 130
    if not scored.predictions:
        for e in scored.errors[:5]:
            say(f"{e['id']}: {e['error']}")
        say("no case was scored")
        return EXIT_FAILED
    results = scoring.results(
        scored,
        cases,
        cases_path,
        target_accuracy=args.target_accuracy,
        min_support=args.min_support,
        review_accuracy=args.review_accuracy,
        max_error=args.max_error,
        confidence=args.confidence,
    )
    written = scoring.write_plots(out, scored.predictions, results["recommendation"]["overall"])
    automation = scoring.write_automation_plots(out, results["certification"])
    print(tables.evaluation(results))
    print("\nThe recommendation above is a point estimate on these cases; the policy is written from this:")
    print(tables.certification(results["certification"]))
    status = 0
    if args.fit_calibration:
        print()
        status = _fit(args, scored, results, cases_path)
        if "calibration_fit" in results:  # the fit ran and drew its figure
            written.append(out / scoring.HELDOUT_PNG)
    if args.write_policy:
        print()
        keys = bands.question_keys(cases)
        status = _write_policy(Path(args.write_policy), scored, results, keys, args.review_input_flags) or status
    written.insert(0, scoring.write_results(out, results))
    if scored.errors:
        say(
            f"{len(scored.errors)} cases failed (listed in results.json; a re-run retries them), e.g. "
            f"{scored.errors[0]['id']}: {scored.errors[0]['error']}"
        )
        status = EXIT_FAILED
    identity = results["identity"] or {}
    print(
        f"model sha256 {identity.get('model_sha256', 'not reported')}, calibration "
        f"{json.dumps((identity.get('calibration') or {}), sort_keys=True)}"
    )
    print(
        "wrote "
        + ", ".join(str(p) for p in written)
        + f" and {len(automation)} figures in {out / scoring.AUTOMATION_DIR}"
    )
    return status


def _score(args: argparse.Namespace, cases: list[Case], out: Path) -> scoring.Run | None:
    """The cases scored into `out` (without an endpoint: only its saved predictions read), or None, said why."""
    offline = args.url is None and args.sagemaker_endpoint is None
    endpoint = None if offline else transport(args, max_connections=args.concurrency)
    try:
        return scoring.score_cases(
            cases, endpoint, out, concurrency=args.concurrency, policy=retry_policy(args), restart=args.restart
        )
    except scoring.IdentityChanged as exc:
        say(str(exc))
    except scoring.NotScored as exc:
        say(f"{exc}: give --url or --sagemaker-endpoint to score them")
    finally:
        if endpoint is not None:
            endpoint.close()
    return None


def _refused_arguments(args: argparse.Namespace) -> str | None:
    """Why these arguments cannot run together, or None."""
    for name, value in (
        ("--max-error", args.max_error),
        ("--confidence", args.confidence),
        ("--review-accuracy", args.review_accuracy),
    ):
        if not 0.0 < value < 1.0:
            return f"{name} must be between 0 and 1 (exclusive), got {value}"
    if args.restart and args.url is None and args.sagemaker_endpoint is None:
        return "--restart forgets the saved predictions: it needs --url or --sagemaker-endpoint to score them again"
    if args.write_policy and args.fit_calibration:
        return (
            "--write-policy and --fit-calibration in one run would bind thresholds measured under the old calibration "
            "to the new one: fit first, restart the adapter, then evaluate again with --write-policy"
        )
    return None


def _fit(args: argparse.Namespace, scored: scoring.Run, results: dict[str, Any], cases_path: Path) -> int:
    identity = scored.identity or {}
    provenance = {
        "cases_file": cases_path.name,
        "cases_sha256": results["cases_sha256"],
        "model_sha256": identity.get("model_sha256"),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        fitted, calibration = scoring.fit_calibration(
            scored.predictions, Path(args.out), holdout=args.holdout, seed=args.seed, provenance=provenance
        )
    except ValueError as exc:
        say(f"cannot fit calibration: {exc}")
        return EXIT_FAILED
    results["calibration_fit"] = {**fitted, "calibration": calibration.model_dump(mode="json")}
    print(tables.calibration(fitted))
    if args.manifest is None:
        print(json.dumps({"calibration": calibration.model_dump(mode="json")}, indent=2, sort_keys=True))
        return 0
    try:
        said = manifests.write_temperatures(
            Path(args.manifest), calibration, served_sha256=identity.get("model_sha256"), improved=fitted["improved"]
        )
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return EXIT_FAILED
    say(said)
    return 0


def input_flags_arg(text: str) -> list[str]:
    flags = [] if text == "none" else [f.strip() for f in text.split(",") if f.strip()]
    unknown = sorted(set(flags) - set(INPUT_FLAGS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown input flags {unknown}; known: {', '.join(INPUT_FLAGS)} or none")
    return flags


def _write_policy(
    manifest_path: Path,
    scored: scoring.Run,
    results: dict[str, Any],
    keys: Mapping[str, str],
    review_input_flags: list[str] | None = None,
) -> int:
    created = datetime.now(UTC).date()
    try:
        manifest, policy = manifests.certified_policy(
            manifest_path, len(scored.errors), results, keys, created=created, review_input_flags=review_input_flags
        )
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return EXIT_FAILED
    results["policy"] = policy.model_dump(by_alias=True, mode="json")
    print(tables.policy_actions(policy.version, policies.action_table(scored.predictions, policy, keys)))
    say(manifests.write_policy(manifest_path, manifest, policy))
    return 0
