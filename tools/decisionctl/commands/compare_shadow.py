"""compare --shadow: the options and the run of `decisionctl compare` on two variants' captured answers."""

from __future__ import annotations

import argparse
import dataclasses

from decisionctl.commands.options import say
from decisionctl.traffic import shadow


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
    fields = dataclasses.fields(shadow.ShadowOptions)
    options = shadow.ShadowOptions(**{f.name: getattr(args, f.name) for f in fields})
    result = shadow.compare_shadow(options, say=say)
    print(result.text, end="")
    return result.status
