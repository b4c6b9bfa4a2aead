"""Issue 22, must-show 2: real decision log lines through the synthesized decision-shift metric filters.

One adapter on the bundled model serves a threshold policy (decision-policy/1 bands, sealed here, with a
certified mix); eight real requests of three questions each go through it over HTTP, and its own log lines
are fed to the metric filters of prod's synthesized Serving template with `decision_shift` on. CloudWatch is
not here: tests/cloudwatch_filters.py stands in for it (the documented filter and metric math semantics of
the subset the stack writes). The shares the filters yield are the shares the policy's own verdicts give on
the served answers, recomputed from their probabilities; the option mix is the answers' picks; the alarms
stay quiet on the mix the traffic has and fire on the policy's certified mix, which these answers left.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec import events
from decision_spec.manifest import read_manifest, write_manifest
from decision_spec.policy import Band, CertifiedMix, OptionMix, Policy, Provenance, seal, verdict
from decisionctl.core import bands

from app import build_app
from stacks.decision_shift import action_shift_expression
from tests.app_support import AppServer, start_app
from tests.cdk_support import cdk_context
from tests.cloudwatch_filters import MetricFilter, evaluate_alarm
from tests.conftest import copy_model, require_model

pytestmark = pytest.mark.model

TEAM = {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages, log-in problems", "Sales": "Pricing"}
QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": TEAM},
    "urgent": {"type": "noul", "instructions": "Is this ticket urgent?"},
    "anger": {
        "type": "score",
        "instructions": "How angry is the customer?",
        "criteria": ["Calm", "Annoyed", "Furious"],
    },
}
STATES = [
    "I was charged twice for my invoice, please refund the duplicate payment.",
    "The app crashes every time I log in since the update. Nothing works!",
    "What does the enterprise plan cost for 40 seats?",
    "Your outage cost us a day of sales. Fix it NOW.",
    "Thanks for the quick help last week, all good.",
    "Can I get a refund for the unused months of my contract?",
    "Login fails with error 500 on the web console.",
    "We would like a quote to upgrade from basic to premium.",
]
ROUTING = bands.question_key(QUESTIONS["team"])
# What a certification on labeled cases recorded (the policy's own claim about its mix), set here: far from what
# chance-level answers do.
CERTIFIED = CertifiedMix(
    cases=120,
    actions={"automate": 0.95, "review": 0.04, "abstain": 0.01},
    questions={ROUTING: OptionMix(type="choice", cases=40, options=list(TEAM), shares=[0.9, 0.05, 0.05])},
)
# Automating at 0.95 and above: the near-chance model seldom is that sure, so live automation is far below 95 %.
BANDS = {
    "noul": Band(automate_at_or_above=0.95, review_at_or_above=0.55),
    "choice": Band(automate_at_or_above=0.95, review_at_or_above=0.4),
    "score": Band(automate_at_or_above=0.95, review_at_or_above=0.4),
}
MIN_ANSWERS = 8


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AppServer, Policy]]:
    require_model()
    root = tmp_path_factory.mktemp("shift")
    model = copy_model(root / "model")
    manifest = read_manifest(model / "manifest.json")
    policy = seal(
        model_sha256=manifest.sha256,
        calibration_sha256=manifest.calibration_sha256(),
        types=BANDS,
        provenance=Provenance(
            cases_file="cases.jsonl",
            cases_sha256="0" * 64,
            target_accuracy=0.9,
            min_support=1,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
        schema="decision-policy/1",
        certified_mix=CERTIFIED,
    )
    write_manifest(manifest.model_copy(update={"policy": policy}), model / "manifest.json")
    adapter = start_app(model_dir=model)
    yield adapter, policy
    adapter.stop()


@pytest.fixture(scope="module")
def traffic(served: tuple[AppServer, Policy]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The responses of the eight requests and the adapter's log lines (every line, parsed where JSON)."""
    adapter, _ = served
    bodies = []
    for state in STATES:
        r = httpx.post(adapter.url + "/v1/systemone", json={"state": state, "questions": QUESTIONS}, timeout=300)
        assert r.status_code == 200, r.text
        bodies.append(r.json())
    return bodies, adapter.log_lines()


@pytest.fixture(scope="module")
def template(served: tuple[AppServer, Policy]) -> dict[str, Any]:
    """prod's Serving template with decision_shift on, certified = the served policy's certified_mix."""
    _, policy = served
    assert policy.certified_mix is not None
    context = cdk_context()
    prod = context["environments"]["prod"]
    prod["decision_shift"] = {
        "enabled": True,
        "policy_version": policy.version,
        "certified": policy.certified_mix.model_dump(mode="json"),  # copied as docs/deploy.md says
        "routing_questions": [ROUTING],
        "action_band_points": 20,
        "option_band_points": 25,
        "min_answers": MIN_ANSWERS,
        "min_mean_label_mass": 0.01,
    }
    outdir = Path(tempfile.mkdtemp(prefix="cdk-shift-"))
    build_app("prod", context=context, outdir=str(outdir)).synth()
    return dict(json.loads((outdir / "DecisionEndpoints-prod-Serving.template.json").read_text(encoding="utf-8")))


def probs(answer: dict[str, Any]) -> list[float]:
    return [answer["noul"], 1 - answer["noul"]] if answer["type"] == "noul" else list(answer["probabilities"].values())


def expected_counts(bodies: list[dict[str, Any]], policy: Policy) -> tuple[dict[str, int], list[int], float]:
    """From the responses alone: answers per action by the policy's verdict, picks of the routing question's
    options, and the mean label mass."""
    actions = dict.fromkeys(events.ACTION_COUNT_FIELDS, 0)
    picks = [0] * len(TEAM)
    masses = []
    for body in bodies:
        for answer in body["answers"].values():
            v = verdict(
                policy,
                answer["type"],
                probs(answer),
                options_sha256=answer["x_options_sha256"],
                label_mass=answer.get("x_label_mass"),
            )
            actions[v.action] += 1
            masses.append(answer["x_label_mass"])
        picks[list(TEAM).index(body["answers"]["team"]["choice"])] += 1
    return actions, picks, sum(masses) / len(masses)


def decision_shift_filters(template: dict[str, Any], endpoint: str) -> dict[str, MetricFilter]:
    found = {}
    for props in (r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Logs::MetricFilter"):
        f = MetricFilter.from_template(props)
        if f.namespace == f"DecisionEndpoints/{endpoint}" and f.dimensions:
            found[f.name] = f
    return found


def test_the_filters_give_the_shares_the_policy_gives_the_served_answers(
    served: tuple[AppServer, Policy], traffic: tuple[list[dict[str, Any]], list[Any]], template: dict[str, Any]
) -> None:
    _, policy = served
    bodies, lines = traffic
    decisions = [line for line in lines if isinstance(line, dict) and line.get("event") == events.DECISION]
    assert len(decisions) == len(STATES)
    for line in decisions:  # what the filters read holds no request text
        text = json.dumps(line)
        assert not any(state[:30] in text for state in STATES) and "Which team" not in text
    filters = decision_shift_filters(template, "decision-prod-cpu")
    by_policy = (("Policy", policy.version),)
    sums = {name: f.publish(lines).get(by_policy, 0.0) for name, f in filters.items()}
    actions, picks, mean_mass = expected_counts(bodies, policy)
    answers = len(STATES) * len(QUESTIONS)
    assert sum(actions.values()) == answers
    assert {a: sums[m] for a, m in (("automate", "AutomatedAnswers"), ("review", "ReviewedAnswers"),
                                    ("abstain", "AbstainedAnswers"))} == actions  # fmt: skip
    assert [sums.get(f"Picked-{ROUTING}-{i}", 0.0) for i in range(len(TEAM))] == picks
    assert sums["LabelMassAnswers"] == answers
    assert sums["LabelMassSum"] / sums["LabelMassAnswers"] == pytest.approx(mean_mass, abs=1e-3)
    # the lines of no other policy version, and lines that are not JSON, add nothing
    assert all(set(f.publish(lines)) <= {by_policy} for f in filters.values())


def test_the_alarms_fire_on_the_certified_mix_and_not_on_the_mix_the_traffic_has(
    served: tuple[AppServer, Policy], traffic: tuple[list[dict[str, Any]], list[Any]], template: dict[str, Any]
) -> None:
    _, policy = served
    bodies, lines = traffic
    filters = decision_shift_filters(template, "decision-prod-cpu")
    values = {}
    for f in filters.values():
        for dims, total in f.publish(lines).items():
            values[(f.namespace, f.name, tuple(sorted(dims)))] = total
    alarms = {
        r["Properties"]["AlarmName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    actions, picks, _ = expected_counts(bodies, policy)
    answers = sum(actions.values())
    observed_points = {a: 100 * n / answers for a, n in actions.items()}
    certified_points = {a: 100 * s for a, s in CERTIFIED.actions.items()}
    action_alarm = alarms["decision-prod-cpu-decision-shift-actions"]
    distance = evaluate_alarm(action_alarm["Metrics"], values)
    assert distance == pytest.approx(
        max(abs(observed_points[a] - certified_points[a]) for a in events.ACTION_COUNT_FIELDS)
    )
    option_alarm = alarms["decision-prod-cpu-decision-shift-options"]
    option_distance = evaluate_alarm(option_alarm["Metrics"], values)
    shares = [100 * n / len(STATES) for n in picks]
    certified_shares = CERTIFIED.questions[ROUTING].shares
    assert option_distance == pytest.approx(
        max(abs(s - 100 * c) for s, c in zip(shares, certified_shares, strict=True))
    )
    # the certified mix is not what these answers did: the action alarm fires (more than 20 points off)
    assert observed_points["automate"] < 75 and distance > action_alarm["Threshold"] == 20
    # certified on this very traffic, the same expression reads 0 (to the template's 6 digits): inside any band
    observed = CertifiedMix.model_validate({"cases": answers, "actions": {a: n / answers for a, n in actions.items()}})
    quiet = [
        {**m, "Expression": action_shift_expression(observed, MIN_ANSWERS)} if "Expression" in m else m
        for m in action_alarm["Metrics"]
    ]
    assert evaluate_alarm(quiet, values) == pytest.approx(0.0, abs=1e-3)
    mass_alarm = alarms["decision-prod-cpu-label-mass-low"]
    assert evaluate_alarm(mass_alarm["Metrics"], values) > mass_alarm["Threshold"]  # the floor 0.01 holds
