"""decisionctl cost names what the cheapest mode gives up of what cdk.json asks of the section (issue 46): prod's
canary on the CPU endpoint and its GPU pool, which components hosting refuses at synth."""

from __future__ import annotations

from decision_spec.environment_config import EnvironmentConfig, load_environment
from decision_spec.hosting_config import ComponentsHosting, refusals
from decisionctl.core.prices import load_prices
from decisionctl.load import costs
from decisionctl.load.cost_job import CostOptions, price_profile

from tests.cdk_support import ROOT, cdk_context


def prod() -> EnvironmentConfig:
    return load_environment(cdk_context()["environments"], "prod")


def test_components_gives_up_the_canary_and_the_pool_synth_would_refuse() -> None:
    sections = {s.name: s for s in costs.sections_of(prod())}
    assert sections["cpu"].given_up("components") == (
        "the canary deployment with its bake (copies update in rolling batches)",
    )
    assert sections["gpu"].given_up("components") == ("the instance pool (fallback_instance_types)",)
    assert "the GPU (serverless is CPU only)" in sections["gpu"].given_up("serverless")
    assert sections["cpu"].given_up("instances") == ()
    # the same settings are what synth refuses for components (decision_spec/hosting_config.py)
    hosting = ComponentsHosting(mode="components", cpu_cores_per_copy=2)
    cpu = refusals(hosting, gpu=False, pooled=False, shadow=False, strategy="canary", rollback_on_alarms=True,
                   scaling_enabled=True, min_instances=2)  # fmt: skip
    gpu = refusals(hosting, gpu=True, pooled=True, shadow=False, strategy="rolling", rollback_on_alarms=True,
                   scaling_enabled=True, min_instances=2)  # fmt: skip
    assert [r.split(":")[0] for r in cpu] == ["deployment.strategy canary"]
    assert [r.split(":")[0] for r in gpu] == ["fallback_instance_types"]


def test_the_report_says_it_beside_the_cheapest_mode() -> None:
    sections = costs.sections_of(prod())
    _, report = costs.report(costs.PROFILES["nightly-triage"], sections, load_prices(), costs.Assumptions())
    assert report["recommended"]["cpu"]["mode"] == "components"
    assert report["recommended"]["cpu"]["gives_up"] == [
        "the canary deployment with its bake (copies update in rolling batches)"
    ]


def test_every_priced_mode_says_what_it_gives_up(tmp_path) -> None:
    sections = costs.sections_of(prod())
    _, report = costs.report(costs.PROFILES["nightly-triage"], sections, load_prices(), costs.Assumptions())
    assert report["gives_up"]["cpu"]["serverless"] == ["network isolation", "the canary deployment"]
    assert report["gives_up"]["cpu"]["instances"] == []
    assert "serverless" not in report["gives_up"]["gpu"]  # not priced: serverless inference is CPU only
    printed = price_profile(
        CostOptions(env="prod", cdk_json=str(ROOT / "cdk.json"), profile="nightly-triage", out=str(tmp_path))
    )
    assert "cpu, what the other modes give up: serverless: network isolation, the canary deployment" in printed
