"""decisionctl cost (load/costs.py): each hosting mode's monthly cost for a traffic profile on cdk.json's instance types
and the shipped price table, the break-even traffic, the recommended mode; the command's table, JSON and plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from decision_spec.environment_config import load_environment
from decision_spec.hosting_config import ServerlessHosting, serverless_memory_of
from decision_spec.memory import ModelFootprint
from decisionctl.commands import cli
from decisionctl.core.prices import load_prices
from decisionctl.load import costs
from decisionctl.load.cost_job import CostOptions, UnknownEnvironment, price_profile

from tests.cdk_support import ROOT, cdk_context

PRICES = load_prices()
DEV = costs.sections_of(load_environment(cdk_context()["environments"], "dev"))[0]
A = costs.Assumptions()


def test_the_price_table_is_dated_and_prices_serverless_as_unchecked_examples() -> None:
    assert PRICES.date == "2026-12-02" and not PRICES.checked
    assert PRICES.serverless is not None and not PRICES.serverless.checked
    assert PRICES.serverless.per_gb_second == 0.00002 and PRICES.serverless.per_request == 0.0
    assert "not checked against AWS" in PRICES.serverless.note and "https://aws.amazon.com/sagemaker/pricing/" in (
        PRICES.serverless.note
    )


def test_dev_is_read_from_cdk_json_as_synth_sizes_it() -> None:
    dev = cdk_context()["environments"]["dev"]
    memory = serverless_memory_of(
        ServerlessHosting(mode="serverless", max_concurrency=1, network_isolation=False),
        ModelFootprint.model_validate(dev["model"]["footprint"]),
        ctx_size=dev["cpu"]["ctx_size"],
        contexts=dev["cpu"]["max_concurrency"],
    )
    assert costs.CostedSection("cpu", "ml.c6i.xlarge", 1, False, memory, 4, "") == DEV
    assert memory == 1024
    prod = costs.sections_of(load_environment(cdk_context()["environments"], "prod"))
    assert [s.name for s in prod] == ["cpu", "gpu"] and prod[1].serverless_memory_mb is None
    assert "CPU only" in prod[1].not_serverless and prod[0].not_serverless == ""  # prod's footprint is the decider's
    prod_cpu = cdk_context()["environments"]["prod"]
    assert prod[0].serverless_memory_mb == serverless_memory_of(
        ServerlessHosting(mode="serverless", max_concurrency=1, network_isolation=False),
        ModelFootprint.model_validate(prod_cpu["model"]["footprint"]),
        ctx_size=prod_cpu["cpu"]["ctx_size"],
        contexts=prod_cpu["cpu"]["max_concurrency"],
    )


def test_instances_cost_the_floor_around_the_clock_and_more_where_the_load_needs_it() -> None:
    quiet = costs.PROFILES["dev-office-hours"]
    assert costs.monthly("instances", quiet, DEV, PRICES, A) == pytest.approx(0.204 * 730)
    hours = tuple(5400.0 if h == 3 else 0.0 for h in range(24))
    busy = costs.Profile("busy", "one hour of 5,400 one-second decisions", hours)
    assert costs.instances_daily_hours(busy, 1, A) == 25  # that hour needs two instances


def test_components_bill_a_wake_and_the_idle_tail_of_each_stretch() -> None:
    one = costs.Profile("one", "one call a day", tuple(1.0 if h == 12 else 0.0 for h in range(24)))
    assert costs.components_daily_hours(one, A) == pytest.approx((A.wake_minutes + A.idle_minutes) / 60)
    office = costs.PROFILES["dev-office-hours"]  # 12 an hour, 5 min apart: one stretch from 09:02:30
    hours = costs.components_daily_hours(office, A)
    assert hours == pytest.approx((60 * 9 - 5 + A.idle_minutes) / 60, abs=1e-6)
    assert costs.components_daily_hours(costs.flat(24_000), A) == 24.0  # never idle: an instance all day
    # calls closer than the idle minutes, thinned, hold the instance all day, and the load adds instances
    assert costs.components_daily_hours(costs.flat(1_000_000), A) == 24 * 12  # 41,667 s of work an hour: 12


def test_serverless_pays_gb_seconds_at_its_cpu_share_and_data_processed() -> None:
    seconds = A.seconds_per_decision * DEV.threads / (1024 / costs.LAMBDA_MB_PER_VCPU)
    assert A.serverless_seconds(DEV) == pytest.approx(seconds)  # 6.9 s: 4 threads' work on 0.58 vCPU
    per_decision = seconds * 1.0 * 0.00002 + 4 * 1024 / (1 << 30) * 0.016
    steady = costs.PROFILES["steady"]
    assert costs.monthly("serverless", steady, DEV, PRICES, A) == pytest.approx(24_000 * per_decision * 730 / 24)
    measured = costs.Assumptions(serverless_seconds_per_decision=2.0)
    assert measured.serverless_seconds(DEV) == 2.0


def test_break_even_is_where_a_scale_to_zero_mode_stops_saving() -> None:
    even = costs.break_even("components", costs.flat(1000), DEV, PRICES, A)
    assert even is not None and even * 1000 == pytest.approx(1440 / A.idle_minutes, rel=0.01)  # a call every 27 min
    assert costs.break_even("components", costs.PROFILES["approval-gate"], DEV, PRICES, A) is None  # its idle nights
    serverless = costs.break_even("serverless", costs.flat(1000), DEV, PRICES, A)
    per_decision = A.serverless_seconds(DEV) * 0.00002 + 4 * 1024 / (1 << 30) * 0.016
    assert serverless is not None
    assert serverless * 1000 == pytest.approx(0.204 * 24 / per_decision, rel=0.01)  # one instance's day, in decisions


@pytest.mark.parametrize(
    ("profile", "cheapest"),
    [
        ("dev-office-hours", "serverless"),
        ("approval-gate", "serverless"),
        ("nightly-triage", "components"),
        ("steady", "serverless"),
    ],
)
def test_the_command_prices_each_profile_and_recommends_the_cheapest(
    profile: str, cheapest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cost"
    argv = ["cost", "--profile", profile, "--cdk-json", str(ROOT / "cdk.json"), "--out", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"cpu: {cheapest} is cheapest" in printed and "EXAMPLES, not checked against AWS" in printed
    assert "break-even a day: this shape / even" in printed
    report = json.loads((out / "cost.json").read_text())
    assert report["recommended"]["cpu"]["mode"] == cheapest
    assert {r["mode"] for r in report["rows"]} == set(costs.MODES)
    assert report["prices"]["date"] == "2026-12-02" and report["hours_per_month"] == 730
    assert (out / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    instances = next(r for r in report["rows"] if r["mode"] == "instances")
    assert all(math.isfinite(r["monthly"]) and r["monthly"] <= instances["monthly"] for r in report["rows"])


def test_a_profile_of_your_own_and_a_wrong_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hours = ["0"] * 8 + ["100"] * 10 + ["0"] * 6
    argv = ["cost", "--per-hour", *hours, "--cdk-json", str(ROOT / "cdk.json"), "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    assert "yours: decisions per hour from --per-hour (1,000 decisions a day), dev" in capsys.readouterr().out
    with pytest.raises(ValueError, match="24 decisions-per-hour values >= 0"):
        costs.Profile("bad", "", (1.0,) * 23)


@pytest.mark.parametrize(
    "footprint",
    [{"gguf_bytes": 0, "kv_bytes_per_token": 1}, {"gguf_bytes": 10}, {"gguf_bytes": "x", "kv_bytes_per_token": 1}],
)
def test_a_footprint_synth_would_refuse_is_refused_with_synths_message(
    footprint: dict[str, object], tmp_path: Path
) -> None:
    """cost reads the environment as synth does (decision_spec.environment_config.load_environment): one synth would
    refuse is a usage error naming the key at fault, not a price."""
    context = cdk_context()
    context["environments"]["dev"]["model"]["footprint"] = footprint
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": context}))
    with pytest.raises(
        UnknownEnvironment, match=r"(?s)--env dev: synth would refuse it: .*environments\.dev\.model\.footprint"
    ):
        price_profile(CostOptions(env="dev", cdk_json=str(cdk_json), out=str(tmp_path)))
