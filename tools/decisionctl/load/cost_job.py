"""The cost use case: an environment's decision sections read from cdk.json, priced under each hosting mode for a
traffic profile; cost.json and cost.png written, the text to print returned."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from decision_spec.environment_config import ConfigError, load_environment

from decisionctl import plots, tables
from decisionctl.core.prices import BUILTIN, load_prices
from decisionctl.load import costs


class UnknownEnvironment(ValueError):
    """--env names no environment of the cdk.json read, or one synth refuses (decision_spec/environment_config.py's
    message): a usage error, which the command reports as argparse would."""


@dataclass(frozen=True)
class CostOptions:
    """What `decisionctl cost` was asked, as plain values (its arguments' names)."""

    env: str = "dev"
    cdk_json: str = "cdk.json"
    profile: str | None = None
    per_hour: list[float] | None = None
    seconds_per_decision: float = 1.0
    serverless_seconds_per_decision: float | None = None
    wake_minutes: float = 6.0
    idle_minutes: float = 27.0
    kb_per_decision: float = 4.0
    prices: str = BUILTIN
    out: str = "cost"


def price_profile(o: CostOptions) -> str:
    """Price the profile on the environment's sections, write cost.json and cost.png into `o.out`; what to print."""
    if o.per_hour is not None:
        profile = costs.Profile("yours", "decisions per hour from --per-hour", tuple(o.per_hour))
    else:
        profile = costs.PROFILES[o.profile or "dev-office-hours"]
    environments = json.loads(Path(o.cdk_json).read_text(encoding="utf-8"))["context"]["environments"]
    if o.env not in environments:
        raise UnknownEnvironment(f"--env {o.env}: no such environment in {o.cdk_json} ({', '.join(environments)})")
    try:
        config = load_environment(environments, o.env)
    except ConfigError as exc:
        raise UnknownEnvironment(f"--env {o.env}: synth would refuse it: {exc}") from None
    sections = costs.sections_of(config)
    assumptions = costs.Assumptions(
        seconds_per_decision=o.seconds_per_decision,
        wake_minutes=o.wake_minutes,
        idle_minutes=o.idle_minutes,
        kb_per_decision=o.kb_per_decision,
        serverless_seconds_per_decision=o.serverless_seconds_per_decision,
    )
    prices = load_prices(o.prices)
    rows, report = costs.report(profile, sections, prices, assumptions)
    lines = [f"{profile.name}: {profile.description} ({profile.per_day:,.0f} decisions a day), {o.env}"]
    lines.append(tables.costs(rows, prices.currency))
    for section, best in report["recommended"].items():
        lines.append(
            f"\n{section}: {best['mode']} is cheapest ({prices.currency} {best['monthly']:,.2f} a month, "
            f"{best['saving']:,.2f} less than instances); its cost in waiting: {best['wait']}"
            + (
                f"; it gives up what cdk.json asks of {section} (synth refuses these there): "
                + ", ".join(best["gives_up"])
                if best["gives_up"]
                else ""
            )
        )
        others = [
            f"{mode}: {', '.join(lost)}"
            for mode, lost in report["gives_up"][section].items()
            if lost and mode != best["mode"]
        ]
        if others:
            lines.append(f"{section}, what the other modes give up: " + "; ".join(others))
    unchecked = "" if prices.checked else " (EXAMPLES, not checked against AWS)"
    lines.append(
        f"\nprices: {prices.source}, {prices.region}, {prices.date or 'undated'}{unchecked}; a month is 730 hours"
    )
    out = Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    panels = {s.name: costs.curves(profile, s, prices, assumptions) for s in sections}
    title = f"{o.env}, {profile.name}: monthly cost by hosting mode"
    plots.cost_plot(out / "cost.png", panels, at=profile.per_day, currency=prices.currency, title=title)
    lines.append(f"wrote {out / 'cost.json'}, {out / 'cost.png'}")
    return "".join(line + "\n" for line in lines)
