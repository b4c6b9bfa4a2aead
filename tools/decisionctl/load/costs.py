"""What each hosting mode (decision_spec/hosting_config.py) costs a month for a traffic profile, where the modes break
even, and which one to choose: pure functions over a profile, a price table and the section's settings.

A profile is decisions per hour for each hour of the day, spread evenly within the hour, the same every day. One
decision keeps its copy busy `seconds_per_decision`. The modes, priced over a month of 730 hours:

- instances: `min_instances` always on, more where the hour's load needs them (busy seconds / 3600, rounded up).
- components (scale to zero): an instance is billed from the call that finds none (the wake, `wake_minutes`: the
  instance starts, the image and model load; unmeasured here) until `idle_minutes` after the last call (Application
  Auto Scaling's scale-in alarm, then managed instance scaling releasing the instance); calls closer together than
  that keep it up. Busy hours add instances as above.
- serverless: the seconds each decision runs times the configured memory (GB-seconds), the data processed, a fee
  per request where the table has one; nothing between calls. Serverless gives a container CPU in proportion to its
  memory; assumed here as AWS Lambda's (1 vCPU per 1,769 MB; SageMaker serverless runs on Lambda), a decision runs
  the section's threads / those vCPUs times longer than on its instance (unmeasured: pass a measured time instead).

The break-even of a scale-to-zero mode is the traffic of this profile's shape (its every hour scaled alike) at which
it costs as much as instances: for serverless where its per-decision cost has caught up, for components where calls
come close enough to keep an instance up all day. A profile with hours of no traffic never loses components' saving
on them (no break-even at its shape), so each is also given for traffic spread evenly around the clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from decision_spec.endpoint_config import CpuEndpoint, GpuEndpoint
from decision_spec.environment_config import EnvironmentConfig
from decision_spec.memory import serverless_memory_mb

from decisionctl.core.prices import PriceTable

HOURS_PER_MONTH = 730.0
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
MODES = ("instances", "components", "serverless")
SAVING_LEFT = 1e-6  # below this share of the instances' cost, a mode saves nothing (float noise)
GB = 1 << 30
EVEN_BASE = 1000.0  # decisions a day the around-the-clock break-even is searched from (x 1e-4 to 1e4)
LAMBDA_MB_PER_VCPU = 1769  # AWS Lambda's memory per full vCPU (assumed for SageMaker serverless)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    per_hour: tuple[float, ...]  # 24 values, hour 0 to 23

    def __post_init__(self) -> None:
        if len(self.per_hour) != 24 or any(v < 0 or not math.isfinite(v) for v in self.per_hour):
            raise ValueError(f"profile {self.name}: 24 decisions-per-hour values >= 0, got {list(self.per_hour)}")

    @property
    def per_day(self) -> float:
        return sum(self.per_hour)

    def scaled(self, factor: float) -> Profile:
        return Profile(self.name, self.description, tuple(v * factor for v in self.per_hour))


def _hours(first: int, last: int, per_hour: float) -> tuple[float, ...]:
    return tuple(per_hour if first <= h <= last else 0.0 for h in range(24))


PROFILES = {
    p.name: p
    for p in (
        Profile(
            "dev-office-hours",
            "a dev environment tried in office hours: 12 decisions an hour, 09-17",
            _hours(9, 17, 12),
        ),
        Profile("approval-gate", "an approval gate: 40 decisions an hour, 08-19", _hours(8, 19, 40)),
        Profile("nightly-triage", "a nightly triage: 5,000 decisions between 02:00 and 03:00", _hours(2, 2, 5000)),
        Profile("steady", "steady traffic around the clock: 1,000 decisions an hour", _hours(0, 23, 1000)),
    )
}


@dataclass(frozen=True)
class CostedSection:
    """What costing reads of one decision section: where it runs and how it is sized."""

    name: str
    instance_type: str
    min_instances: int  # as hosted on instances (at least 1)
    gpu: bool
    serverless_memory_mb: int | None  # None: not offered (`not_serverless` says why)
    threads: int = 1  # SM_LLAMA_CPP_THREADS on the instance: the cores a decision's time was measured with
    not_serverless: str = ""
    # mode -> what of the section's cdk.json it cannot host (a note on the section, not part of what is priced)
    gives_up: tuple[tuple[str, tuple[str, ...]], ...] = field(default=(), compare=False)

    def given_up(self, mode: str) -> tuple[str, ...]:
        return dict(self.gives_up).get(mode, ())


@dataclass(frozen=True)
class Assumptions:
    seconds_per_decision: float = 1.0
    wake_minutes: float = 6.0
    idle_minutes: float = 27.0
    kb_per_decision: float = 4.0  # request and answer together, for serverless's data processed
    serverless_seconds_per_decision: float | None = None  # None: from the CPU share (module docstring)

    def __post_init__(self) -> None:
        if self.seconds_per_decision <= 0 or self.wake_minutes < 0 or self.idle_minutes < 1:
            raise ValueError("seconds per decision must be > 0, wake minutes >= 0 and idle minutes >= 1")

    def serverless_seconds(self, section: CostedSection) -> float:
        if self.serverless_seconds_per_decision is not None:
            return self.serverless_seconds_per_decision
        vcpus = (section.serverless_memory_mb or 0) / LAMBDA_MB_PER_VCPU
        return self.seconds_per_decision * max(1.0, section.threads / vcpus) if vcpus else math.inf


def _extra_instances(per_hour: float, a: Assumptions) -> int:
    """Instances beyond one that an hour's load keeps busy."""
    return max(0, math.ceil(per_hour * a.seconds_per_decision / 3600) - 1)


def instances_daily_hours(profile: Profile, floor: int, a: Assumptions) -> float:
    return sum(max(floor, 1 + _extra_instances(n, a)) for n in profile.per_hour)


def components_daily_hours(profile: Profile, a: Assumptions) -> float:
    """Instance-hours a day when the last copy goes `idle_minutes` after the last call and comes back on the next.
    Two days are walked and the second counted, so that a stretch running past midnight is billed where it runs; less
    than a call a day costs its share of one isolated call."""
    if profile.per_day < 1:
        return (
            profile.per_day * components_daily_hours(profile.scaled(1 / profile.per_day), a) if profile.per_day else 0.0
        )
    intervals: list[tuple[float, float]] = []
    for t in _calls(profile.per_hour * 2, a.idle_minutes):
        if intervals and t <= intervals[-1][1]:  # still up (or starting): held until idle_minutes after this call
            intervals[-1] = (intervals[-1][0], max(intervals[-1][1], t + a.idle_minutes))
        else:  # a wake: billed from this call, answered wake_minutes later, up idle_minutes after that
            intervals.append((t, t + a.wake_minutes + a.idle_minutes))
    minutes = sum(max(0.0, min(end, 2880.0) - max(start, 1440.0)) for start, end in intervals)
    return minutes / 60 + sum(_extra_instances(n, a) for n in profile.per_hour)


def _calls(per_hour: Sequence[float], idle: float) -> list[float]:
    """The calls of these hours, in minutes, evenly spaced within each hour and carried across hours (a call falls
    where the running count passes k + 1/2). Calls closer than `idle` / 2 are thinned to one every idle / 2 minutes
    over the same span: they hold the instance just as long, and dense traffic takes no more steps to cost."""
    calls: list[float] = []
    count = 0.0
    for hour, n in enumerate(per_hour):
        if n <= 0:
            continue
        gap = 60.0 / n
        if gap <= idle / 2:
            first, last = 60.0 * hour + gap / 2, 60.0 * hour + 60.0 - gap / 2
            steps = max(1, math.ceil((last - first) / (idle / 2)))
            calls += [first + (last - first) * i / steps for i in range(steps + 1)]
        else:
            k = math.floor(count - 0.5) + 1  # the next k with k + 1/2 above the count so far
            while k + 0.5 <= count + n:
                calls.append(60.0 * hour + (k + 0.5 - count) * gap)
                k += 1
        count += n
    return calls


def monthly(mode: str, profile: Profile, section: CostedSection, prices: PriceTable, a: Assumptions) -> float | None:
    """The mode's monthly cost for `section` at `profile`; None where the section cannot be hosted so."""
    if mode == "serverless":
        if section.serverless_memory_mb is None or prices.serverless is None:
            return None
        s = prices.serverless
        per_decision = (
            a.serverless_seconds(section) * section.serverless_memory_mb / 1024 * s.per_gb_second
            + a.kb_per_decision * 1024 / GB * s.per_gb_processed
            + s.per_request
        )
        return profile.per_day * per_decision * DAYS_PER_MONTH
    hourly = prices.price(section.instance_type)
    if mode == "instances":
        return instances_daily_hours(profile, section.min_instances, a) * hourly * DAYS_PER_MONTH
    return components_daily_hours(profile, a) * hourly * DAYS_PER_MONTH


def flat(per_day: float) -> Profile:
    return Profile("flat", "evenly around the clock", tuple(per_day / 24 for _ in range(24)))


def break_even(mode: str, profile: Profile, section: CostedSection, prices: PriceTable, a: Assumptions) -> float | None:
    """The factor of `profile` at which `mode` stops saving against instances (None: it never saves, or saves at
    every traffic up to 10,000 times the profile's)."""

    def saves(factor: float) -> bool:
        scaled = profile.scaled(factor)
        cost, always = monthly(mode, scaled, section, prices, a), monthly("instances", scaled, section, prices, a)
        assert always is not None
        if cost is None:
            return False
        return cost < always * (1 - SAVING_LEFT)

    low, high = 1e-4, 1e4
    if not saves(low) or saves(high):
        return None
    for _ in range(60):  # bisect on a log scale: the factor to about 0.1 %
        middle = math.sqrt(low * high)
        low, high = (middle, high) if saves(middle) else (low, middle)
    return high


@dataclass(frozen=True)
class Row:
    section: str
    instance_type: str
    mode: str
    monthly: float | None
    break_even_per_day: float | None  # at the profile's shape
    flat_break_even_per_day: float | None  # spread evenly around the clock
    note: str

    def cells(self) -> list[str]:
        """The row as tables.costs prints it."""
        days = (self.break_even_per_day, self.flat_break_even_per_day)
        even = " / ".join("never" if v is None else f"{v:,.0f}" for v in days)
        cost = "-" if self.monthly is None else f"{self.monthly:,.2f}"
        shown = "" if self.mode == "instances" or self.monthly is None else even
        return [self.section, self.mode, self.instance_type, cost, shown, self.note]


def cost_rows(profile: Profile, sections: Sequence[CostedSection], prices: PriceTable, a: Assumptions) -> list[Row]:
    rows = []
    for section in sections:
        for mode in MODES:
            cost = monthly(mode, profile, section, prices, a)
            shaped = break_even(mode, profile, section, prices, a) if mode != "instances" else None
            even = break_even(mode, flat(EVEN_BASE), section, prices, a) if mode != "instances" else None
            rows.append(
                Row(
                    section.name,
                    "serverless" if mode == "serverless" else section.instance_type,
                    mode,
                    cost,
                    shaped * profile.per_day if shaped is not None else None,
                    even * EVEN_BASE if even is not None else None,
                    _note(mode, section, a),
                )
            )
    return rows


def _note(mode: str, section: CostedSection, a: Assumptions) -> str:
    if mode == "instances":
        return f"{section.min_instances} always on"
    if mode == "components":
        return f"a wake of ~{a.wake_minutes:g} min (unmeasured), up {a.idle_minutes:g} min after the last call"
    if section.serverless_memory_mb is None:
        return f"not offered: {section.not_serverless}"
    seconds = a.serverless_seconds(section)
    return f"{section.serverless_memory_mb} MB, {seconds:.3g} s a decision; a cold start per container (unmeasured)"


def recommend(rows: Sequence[Row], section: str) -> Row:
    """The cheapest mode of a section (instances where nothing is cheaper)."""
    offered = [r for r in rows if r.section == section and r.monthly is not None]
    return min(offered, key=lambda r: (r.monthly, MODES.index(r.mode)))


def sections_of(config: EnvironmentConfig) -> list[CostedSection]:
    """The decision sections of one environment, validated as synth validates it
    (decision_spec/environment_config.py), as costing reads them: the serverless memory as synth would size it
    (decision_spec/memory.py, as decision_spec/hosting_config.py does), or why a section cannot be serverless."""
    found = []
    footprint = config.model.footprint
    for name, section in config.decision_endpoints.items():
        gpu = name == "gpu"
        memory, why = None, "serverless inference is CPU only" if gpu else ""
        if not gpu and footprint is None:
            why = "cdk.json's model.footprint is not set (the model's size sizes serverless memory)"
        elif not gpu and footprint is not None:
            try:
                memory = serverless_memory_mb(
                    None,
                    footprint.gguf_bytes,
                    footprint.kv_bytes_per_token,
                    ctx_size=section.ctx_size,
                    contexts=section.max_concurrency,
                    state_cache_mb=section.adapter.state_cache_mb if section.adapter else None,
                )
            except ValueError as exc:
                why = str(exc).split(":")[0]  # "the model needs about N MB (...)"
        found.append(
            CostedSection(
                name,
                section.instance_type,
                max(1, section.autoscaling.min_instances),
                gpu,
                memory,
                section.threads if isinstance(section, CpuEndpoint) else 1,
                why,
                given_up(config, section, gpu=gpu),
            )
        )
    return found


def given_up(
    config: EnvironmentConfig, section: CpuEndpoint | GpuEndpoint, *, gpu: bool
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What each mode cannot host of what the section's cdk.json asks for (synth refuses it there:
    decision_spec/hosting_config.py's refusals), so that a cheaper mode is priced with what it gives up."""
    strategy, rollback = section.deployment.strategy, section.deployment.rollback_on_alarms
    pool = "the instance pool (fallback_instance_types)" if section.fallback_instance_types else None
    shadow = "the shadow variant" if section.shadow is not None else None
    capture = "data capture" if config.data_capture is not None else None
    components = [pool, shadow, capture]
    if strategy in ("canary", "linear"):
        components.append(f"the {strategy} deployment with its bake (copies update in rolling batches)")
    elif strategy == "all_at_once" and rollback:
        components.append("rollback alarms on an all_at_once update")
    serverless = [pool, shadow, capture, "network isolation"]
    if gpu:
        serverless.append("the GPU (serverless is CPU only)")
    if strategy != "all_at_once":
        serverless.append(f"the {strategy} deployment")
    instances = ["scaling to zero"] if section.autoscaling.min_instances == 0 else []
    return (
        ("instances", tuple(instances)),
        ("components", tuple(x for x in components if x)),
        ("serverless", tuple(x for x in serverless if x)),
    )


def curves(
    profile: Profile, section: CostedSection, prices: PriceTable, a: Assumptions, points: int = 61
) -> dict[str, list[tuple[float, float]]]:
    """Each offered mode's monthly cost against decisions a day, the profile's shape scaled from 1/1,000 to 1,000
    times (for cost_plot)."""
    factors = [10 ** (-3 + 6 * i / (points - 1)) for i in range(points)]
    found: dict[str, list[tuple[float, float]]] = {}
    for mode in MODES:
        costs = [(f * profile.per_day, monthly(mode, profile.scaled(f), section, prices, a)) for f in factors]
        if all(cost is not None for _, cost in costs):
            found[mode] = [(day, cost) for day, cost in costs if cost is not None]
    return found


WAITS = {
    "instances": "no wait: instances always run",
    "components": "the first decision after an idle stretch waits for a wake: an instance start, the image pull, the "
    "model download and the adapter's start, about {wake:g} min assumed (unmeasured here; the adapter's own part is "
    "BENCHMARKS.md's cold start); callers wait through it (--capacity-wait)",
    "serverless": "a new container's cold start (image pull, model load, the adapter's start; unmeasured here), and "
    "the model runs without network isolation",
}


def report(
    profile: Profile, sections: Sequence[CostedSection], prices: PriceTable, a: Assumptions
) -> tuple[list[Row], dict[str, Any]]:
    """The rows tables.costs prints and the JSON-ready report: costs, break-evens, each section's cheapest mode with
    what it costs in waiting, what each priced mode gives up of the section's cdk.json, the assumptions and the prices
    used."""
    rows = cost_rows(profile, sections, prices, a)
    recommended = {}
    for section in sections:
        best = recommend(rows, section.name)
        always = next(r for r in rows if r.section == section.name and r.mode == "instances")
        assert best.monthly is not None and always.monthly is not None
        recommended[section.name] = {
            "mode": best.mode,
            "monthly": best.monthly,
            "saving": always.monthly - best.monthly,
            "wait": WAITS[best.mode].format(wake=a.wake_minutes),
            "gives_up": list(section.given_up(best.mode)),
        }
    priced = {(r.section, r.mode) for r in rows if r.monthly is not None}
    gives_up = {s.name: {m: list(s.given_up(m)) for m in MODES if (s.name, m) in priced} for s in sections}
    return rows, {
        "profile": {"name": profile.name, "description": profile.description, "per_hour": list(profile.per_hour)},
        "decisions_per_day": profile.per_day,
        "hours_per_month": HOURS_PER_MONTH,
        "assumptions": vars(a),
        "rows": [vars(r) for r in rows],
        "recommended": recommended,
        "gives_up": gives_up,  # every priced mode's, not only the cheapest's
        "prices": prices.describe(),
    }
