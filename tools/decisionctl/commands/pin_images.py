"""decisionctl pin-images: look up the llama.cpp DLC digests through ECR and pin them in cdk.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl.commands.options import say
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.release.images import DLC_TAGS, PinError, pin_images


def add_arguments(p: argparse.ArgumentParser) -> None:
    tags = " and ".join(DLC_TAGS.values())
    p.description = (
        f"Resolve the DLC tags {tags} in the environment's DLC registry (environments.ENV.dlc in cdk.json) "
        "with ECR's BatchGetImage, show each digest's change and write the new digests into cdk.json; "
        "nothing else in the file changes. Needs ecr:BatchGetImage on the DLC repository."
    )
    p.add_argument("--env", required=True, metavar="ENV", help="the environment in cdk.json, e.g. dev or prod")
    p.add_argument(
        "--region",
        help="region to look the tags up in (default: environments.ENV.region); another region is read from "
        "its own DLC registry account (containers/decision_spec/dlc_registry.py), not "
        "environments.ENV.dlc.registry_account",
    )
    p.add_argument("--dry-run", action="store_true", help="show the change, write nothing")
    p.add_argument("--cdk-json", default="cdk.json", metavar="FILE", help="the file to pin (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    try:
        result = pin_images(Path(args.cdk_json), args.env, region=args.region, dry_run=args.dry_run)
    except PinError as exc:
        say(f"pin-images: {exc}; {args.cdk_json} was not changed")
        return EXIT_FAILED
    for change in result.changes:
        print(change.describe(args.env))
    if result.written:
        say(f"wrote {args.cdk_json}; review the synth diff (a new digest rebuilds the image) and commit it")
    elif args.dry_run:
        say(f"dry run: {args.cdk_json} was not changed")
    else:
        say(f"{args.cdk_json} already pins these digests")
    return 0
