"""compare --shadow: the options and the run of `decisionctl compare` on two variants' captured answers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.commands.options import EXIT_FAILED, say
from decisionctl.traffic import capture, shadow


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "shadow (--shadow)",
        "BASE and NEW are the production and the shadow variant's data capture (files, directories or s3:// "
        "prefixes); or BASE alone is the endpoint's capture prefix holding both variants.",
    )
    group.add_argument(
        "--shadow", action="store_true", help="compare two variants' captured answers instead of two evaluate runs"
    )
    group.add_argument("--production-variant", metavar="NAME", help="with one capture source: the production variant")
    group.add_argument("--region", help="AWS region of the capture bucket (default: from the AWS configuration)")


def run(args: argparse.Namespace) -> int:
    def client() -> Any:
        import boto3

        return boto3.client("s3", region_name=args.region)

    try:
        base = capture.read_sources([args.base], s3_client=client)
        if args.new is None:
            production, candidate = shadow.split_variants(base.answers, args.production_variant)
        else:
            new = capture.read_sources([args.new], s3_client=client)
            production, candidate = shadow.side_of("base", base.answers), shadow.side_of("new", new.answers)
        report = shadow.compare(production, candidate, top=args.top)
    except (capture.CaptureError, shadow.ShadowError) as exc:
        say(str(exc))
        return EXIT_FAILED
    path = shadow.write_report(report, Path(args.out))
    print(tables.shadow_comparison(report))
    print(f"wrote {path}")
    limit = args.max_changed_rate
    if limit is not None and report["disagreement_rate"] > limit:
        say(f"{tables.pct(report['disagreement_rate'])} of answers disagree, more than --max-changed-rate {limit}")
        return EXIT_FAILED
    return 0
