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

from decision_adapter.manifest import read_manifest, write_manifest

from decisionctl import certified, policies, render
from decisionctl import evaluate as evaluate_mod
from decisionctl.cases import CaseError, load_cases
from decisionctl.commands.options import EXIT_FAILED, add_retry, add_target, retry_policy, say, shipped, transport

NAME = "evaluate"
HELP = "measure accuracy and calibration on labeled cases"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Score a labeled JSONL file against an endpoint (resumable), report accuracy, "
        "macro-F1, Brier, ECE and a coverage table, certify per question and per type the thresholds whose "
        "automated answers have error <= --max-error with probability --confidence out of sample, and write "
        "results.json, reliability.png, confidence_hist.png and automation/<band>.png into --out."
    )
    p.add_argument(
        "cases",
        nargs="?",
        default=str(shipped("examples.jsonl")),
        help="labeled JSONL (default: the shipped example set)",
    )
    add_target(p)
    p.add_argument("--out", default="evaluation", metavar="DIR", help="output directory (default ./evaluation)")
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
    endpoint = transport(args, max_connections=args.concurrency)
    try:
        scored = evaluate_mod.score_cases(
            cases, endpoint, out, concurrency=args.concurrency, policy=retry_policy(args), restart=args.restart
        )
    except evaluate_mod.IdentityChanged as exc:
        say(str(exc))
        return EXIT_FAILED
    finally:
        endpoint.close()
    say(f"{scored.sent} cases sent, {scored.skipped} already scored in {out / evaluate_mod.PREDICTIONS}")
    if scored.interrupted:
        say("interrupted: run the same command again to score the rest")
        return 130
    if not scored.predictions:
        for e in scored.errors[:5]:
            say(f"{e['id']}: {e['error']}")
        say("no case was scored")
        return EXIT_FAILED
    results = evaluate_mod.results(
        scored,
        cases,
        cases_path,
        target_accuracy=args.target_accuracy,
        min_support=args.min_support,
        review_accuracy=args.review_accuracy,
        max_error=args.max_error,
        confidence=args.confidence,
    )
    written = evaluate_mod.write_plots(out, scored.predictions, results["recommendation"]["overall"])
    automation = evaluate_mod.write_automation_plots(out, results["certification"])
    print(render.evaluation(results))
    print("\nThe recommendation above is a point estimate on these cases; the policy is written from this:")
    print(certified.render(results["certification"]))
    status = 0
    if args.fit_calibration:
        print()
        status = _fit(args, scored, results, cases_path)
        if "calibration_fit" in results:  # the fit ran and drew its figure
            written.append(out / evaluate_mod.HELDOUT_PNG)
    if args.write_policy:
        print()
        keys = certified.question_keys(cases)
        status = _write_policy(Path(args.write_policy), scored, results, keys) or status
    written.insert(0, evaluate_mod.write_results(out, results))
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
        + f" and {len(automation)} figures in {out / evaluate_mod.AUTOMATION_DIR}"
    )
    return status


def _refused_arguments(args: argparse.Namespace) -> str | None:
    """Why these arguments cannot run together, or None."""
    for name, value in (
        ("--max-error", args.max_error),
        ("--confidence", args.confidence),
        ("--review-accuracy", args.review_accuracy),
    ):
        if not 0.0 < value < 1.0:
            return f"{name} must be between 0 and 1 (exclusive), got {value}"
    if args.write_policy and args.fit_calibration:
        return (
            "--write-policy and --fit-calibration in one run would bind thresholds measured under the old calibration "
            "to the new one: fit first, restart the adapter, then evaluate again with --write-policy"
        )
    return None


def _fit(args: argparse.Namespace, scored: evaluate_mod.Run, results: dict[str, Any], cases_path: Path) -> int:
    identity = scored.identity or {}
    provenance = {
        "cases_file": cases_path.name,
        "cases_sha256": results["cases_sha256"],
        "model_sha256": identity.get("model_sha256"),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        fitted, calibration = evaluate_mod.fit_calibration(
            scored.predictions, Path(args.out), holdout=args.holdout, seed=args.seed, provenance=provenance
        )
    except ValueError as exc:
        say(f"cannot fit calibration: {exc}")
        return EXIT_FAILED
    results["calibration_fit"] = {**fitted, "calibration": calibration.model_dump(mode="json")}
    print(render.calibration(fitted))
    if args.manifest is None:
        print(json.dumps({"calibration": calibration.model_dump(mode="json")}, indent=2, sort_keys=True))
        return 0
    manifest_path = Path(args.manifest)
    manifest = read_manifest(manifest_path)
    if identity.get("model_sha256") and identity["model_sha256"] != manifest.sha256:
        say(
            f"{manifest_path} is for model sha256 {manifest.sha256}, but the endpoint served "
            f"{identity['model_sha256']}: the manifest was not changed"
        )
        return EXIT_FAILED
    if not fitted["improved"]:
        say(f"{manifest_path} was not changed, because the fitted temperatures did not lower the held-out ECE")
        return 0
    if manifest.calibration is not None and manifest.calibration.slot_prior is not None:
        # the temperatures were fitted on answers the prior had already been divided out of: keep it with them
        calibration = calibration.model_copy(update={"slot_prior": manifest.calibration.slot_prior})
    write_manifest(manifest.model_copy(update={"calibration": calibration}), manifest_path)
    say(
        f"wrote the temperatures into {manifest_path}; restart the adapter (or re-run package-model and "
        "redeploy) and run evaluate again into a new --out directory to confirm"
    )
    return 0


def _write_policy(
    manifest_path: Path, scored: evaluate_mod.Run, results: dict[str, Any], keys: Mapping[str, str]
) -> int:
    if scored.errors or not results["complete"]:
        say(f"{manifest_path} was not changed: {len(scored.errors)} cases failed, a policy needs every case scored")
        return EXIT_FAILED
    manifest = read_manifest(manifest_path)
    try:
        policy = policies.from_results(results, manifest, created=datetime.now(UTC).date(), keys=keys)
    except policies.PolicyRefused as exc:
        say(f"{manifest_path} was not changed: {exc}")
        return EXIT_FAILED
    results["policy"] = policy.model_dump(by_alias=True, mode="json")
    print(render.policy_actions(policy.version, policies.action_table(scored.predictions, policy, keys)))
    if manifest.policy == policy:
        say(f"{manifest_path} already holds policy {policy.version}")
        return 0
    write_manifest(manifest.model_copy(update={"policy": policy}), manifest_path)
    say(
        f"wrote policy {policy.version} into {manifest_path}; restart the adapter (or re-run package-model and "
        "redeploy): its answers then carry x_action and x_run.policy names this version"
    )
    return 0
