"""decisionctl cost: what each hosting mode costs a month for a traffic profile, on cdk.json's instance types."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from decisionctl import plots, tables
from decisionctl.commands.options import UsageError
from decisionctl.load import costs
from decisionctl.load.prices import BUILTIN, load_prices

NAME = "cost"
HELP = "monthly cost of each hosting mode (instances, components, serverless) for a traffic profile; break-even"


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
    shape.add_argument("--profile", choices=sorted(costs.PROFILES), help="a shipped profile (dev-office-hours)")
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
    if args.per_hour is not None:
        profile = costs.Profile("yours", "decisions per hour from --per-hour", tuple(args.per_hour))
    else:
        profile = costs.PROFILES[args.profile or "dev-office-hours"]
    environments = json.loads(Path(args.cdk_json).read_text(encoding="utf-8"))["context"]["environments"]
    if args.env not in environments:
        raise UsageError(f"--env {args.env}: no such environment in {args.cdk_json} ({', '.join(environments)})")
    sections = costs.sections_of(environments[args.env])
    assumptions = costs.Assumptions(
        seconds_per_decision=args.seconds_per_decision,
        wake_minutes=args.wake_minutes,
        idle_minutes=args.idle_minutes,
        kb_per_decision=args.kb_per_decision,
        serverless_seconds_per_decision=args.serverless_seconds_per_decision,
    )
    prices = load_prices(args.prices)
    rows, report = costs.report(profile, sections, prices, assumptions)
    print(f"{profile.name}: {profile.description} ({profile.per_day:,.0f} decisions a day), {args.env}")
    print(tables.costs(rows, prices.currency))
    for section, best in report["recommended"].items():
        print(
            f"\n{section}: {best['mode']} is cheapest ({prices.currency} {best['monthly']:,.2f} a month, "
            f"{best['saving']:,.2f} less than instances); its cost in waiting: {best['wait']}"
        )
    unchecked = "" if prices.checked else " (EXAMPLES, not checked against AWS)"
    print(f"\nprices: {prices.source}, {prices.region}, {prices.date or 'undated'}{unchecked}; a month is 730 hours")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    panels = {s.name: costs.curves(profile, s, prices, assumptions) for s in sections}
    title = f"{args.env}, {profile.name}: monthly cost by hosting mode"
    plots.cost_plot(out / "cost.png", panels, at=profile.per_day, currency=prices.currency, title=title)
    print(f"wrote {out / 'cost.json'}, {out / 'cost.png'}")
    return 0
