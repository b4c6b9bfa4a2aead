"""decisionctl record-evaluation: evaluate a packaged artifact on its environment's suite and write the record
beside the artifact and where cdk.json names it."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from decision_adapter.manifest import MANIFEST_NAME, Manifest

from decisionctl.certification.bands import question_keys
from decisionctl.commands.options import EXIT_FAILED, add_retry, add_target, retry_policy, say, transport
from decisionctl.evaluation import scoring
from decisionctl.evaluation.cases import Case
from decisionctl.review import record as records
from decisionctl.review import settings as review_settings

NAME = "record-evaluation"
HELP = "evaluate a packaged artifact on its environment's suite; write the record synth and deploys check"
WORK_DIR = "evaluation-run"  # in the artifact directory: the predictions, one folder per manifest (--resume)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Score the suite cdk.json names for --env (environments.<env>.evaluation.suite; outside the repository "
        "where evaluation.suite_sha256 states its sha256, which the file must have) on an endpoint serving the "
        "artifact in --artifact (the package-model directory: manifest.json and the GGUF), check that the endpoint "
        "served that artifact (model, calibration, policy), and write the evaluation record: per-case answers by "
        "case id (no text), accuracy, ECE, Brier, the policy's bands measured on the suite, action shares and the "
        "run identity. It goes to ARTIFACT/evaluation.json (package-model --upload puts it beside manifest.json) "
        "and to environments.<env>.evaluation.record, which synth and the deployment's preflight check."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json whose suite and record to use")
    p.add_argument("--artifact", required=True, metavar="DIR", help="the package-model --out directory")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    add_target(p)
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the predictions an interrupted run of this artifact left (the same adapter, settings unchanged); "
        "by default every case is scored again: a record must come from one run",
    )
    add_retry(p)


def _inputs(args: argparse.Namespace) -> tuple[review_settings.Settings, Path, Manifest, bytes, bytes, list[Case]]:
    """The settings, the artifact directory, its manifest (and bytes) and the suite's bytes and cases, checked
    before any case is sent; ValueError if not."""
    settings = review_settings.load(Path(args.cdk_json), args.env)
    artifact = Path(args.artifact)
    manifest_path = artifact / MANIFEST_NAME
    try:
        manifest_bytes = manifest_path.read_bytes()
        manifest = Manifest.model_validate_json(manifest_bytes)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{manifest_path}: not a model manifest ({exc}); package the model first") from None
    suite_bytes, cases = settings.read_suite()
    return settings, artifact, manifest, manifest_bytes, suite_bytes, cases


def run(args: argparse.Namespace) -> int:
    settings, artifact, manifest, manifest_bytes, suite_bytes, cases = _inputs(args)
    work = artifact / WORK_DIR / records.sha256_bytes(manifest_bytes)[:16]
    endpoint = transport(args, max_connections=args.concurrency)
    try:
        scored = scoring.score_cases(
            cases, endpoint, work, concurrency=args.concurrency, policy=retry_policy(args), restart=not args.resume
        )
    except scoring.IdentityChanged as exc:
        say(str(exc))
        return EXIT_FAILED
    finally:
        endpoint.close()
    if scored.interrupted:
        say("interrupted: run the same command with --resume to score the rest")
        return 130
    if scored.errors or len(scored.predictions) != len(cases):
        for e in scored.errors[:5]:
            say(f"{e['id']}: {e['error']}")
        say(f"{len(cases) - len(scored.predictions)} of {len(cases)} cases not scored: a record holds every case")
        return EXIT_FAILED
    try:
        records.check_served(scored.identity, manifest)
    except records.RecordError as exc:
        say(f"not recorded: {exc}")
        return EXIT_FAILED
    digests = {c.id: scoring.case_digest(c) for c in cases}
    record = records.build(
        predictions=scored.predictions,
        case_sha256=digests,
        keys=question_keys(cases),
        identity=scored.identity,
        manifest=manifest,
        manifest_bytes=manifest_bytes,
        suite_path=settings.evaluation.suite,
        suite_bytes=suite_bytes,  # the bytes scored: the record names their sha256
        cases=len(cases),
        created=datetime.now(UTC),
    )
    data = records.dumps(record)
    beside = artifact / records.RECORD_NAME
    for path in (beside, settings.record):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    overall = record["metrics"]["overall"]
    print(
        f"{len(cases)} cases of {settings.evaluation.suite}: accuracy {overall['accuracy']:.1%}, "
        f"ECE {overall['ece']:.3f}, Brier {overall['brier']:.3f}; model {manifest.sha256[:12]}, "
        f"manifest {record['artifact']['manifest_sha256'][:12]}, policy {record['artifact']['policy_version']}"
    )
    print(f"wrote {beside} and {settings.record} (sha256 {records.sha256_bytes(data)})")
    return 0
