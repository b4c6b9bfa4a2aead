"""decisionctl cost: what each hosting mode costs a month for a traffic profile, on cdk.json's instance types."""

from __future__ import annotations

import argparse
import dataclasses

from decisionctl.commands.options import UsageError
from decisionctl.core.prices import BUILTIN
from decisionctl.load import cost_job
from decisionctl.load.costs import PROFILES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Price a traffic profile (decisions per hour for each hour of the day) under each hosting mode of an "
        "environment's decision sections: instances always on, components scaling to zero (billed from a wake "
        "until idle minutes after the last call), serverless (GB-seconds and data processed). Prints the monthly "
        "cost, the traffic at which each scale-to-zero mode stops saving (at this profile's shape and spread "
        "evenly), the cheapest mode with what it costs in waiting; writes cost.json and cost.png. Prices come "
        "from the shipped, dated example table unless --prices names yours. See docs/deploy.md, Hosting modes."
    )
    p.add_argument("--env", default="dev", help="the environment in cdk.json whose sections to price (dev)")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--profile", choices=sorted(PROFILES), help="a shipped profile (dev-office-hours)")
    shape.add_argument(
        "--per-hour", type=float, nargs=24, metavar="N", help="your own profile: 24 decisions-per-hour values, 00-23"
    )
    p.add_argument(
        "--seconds-per-decision",
        type=float,
        default=1.0,
        metavar="S",
        help="how long one decision keeps a copy busy on the section's instance type (bench's p50; default 1.0, "
        "the bundled model's on 2 cores)",
    )
    p.add_argument(
        "--serverless-seconds-per-decision",
        type=float,
        metavar="S",
        help="the same on serverless inference, measured (default: from its CPU share, 1 vCPU per 1,769 MB assumed)",
    )
    p.add_argument("--wake-minutes", type=float, default=6.0, help="a scale from zero to the first answer (6)")
    p.add_argument(
        "--idle-minutes", type=float, default=27.0, help="how long an instance stays after the last call (27)"
    )
    p.add_argument("--kb-per-decision", type=float, default=4.0, help="request and answer, for data processed (4)")
    p.add_argument("--prices", default=BUILTIN, metavar="FILE", help="hourly and serverless prices (shipped table)")
    p.add_argument("--out", default="cost", metavar="DIR", help="where cost.json and cost.png go (./cost)")


def run(args: argparse.Namespace) -> int:
    fields = dataclasses.fields(cost_job.CostOptions)
    try:
        print(cost_job.price_profile(cost_job.CostOptions(**{f.name: getattr(args, f.name) for f in fields})), end="")
    except cost_job.UnknownEnvironment as exc:
        raise UsageError(str(exc)) from None
    return 0
