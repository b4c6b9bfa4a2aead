"""A served threshold policy and the abstention signals, on the real model over real HTTP.

The policy is the one `decisionctl evaluate --write-policy` writes after scoring the shipped examples on
an adapter with the served settings (a policy records its debias mode); one adapter of this module serves
it (every question also offered "none of these", every question read in all rotations). The bundled model
is close to chance, so the tests check the mechanics and contrasts built to be plain, not that its
decisions are good.
"""

from __future__ import annotations

import json
import signal
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_adapter import events
from decision_adapter.manifest import Calibration, read_manifest, write_manifest
from decision_adapter.policy import ACTION_COUNT_FIELDS, Band, Provenance, seal, verdict
from decisionctl import cli
from decisionctl.commands.options import shipped
from jevcompat import runner

from stacks.observability import ACTION_COUNTS

from .conftest import AdapterProcess, copy_model, require_model, start_adapter

pytestmark = pytest.mark.model

TEAM = {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages, log-in problems", "Sales": "Pricing"}
IN_SCOPE = [
    "Billing. This is a billing ticket: a refund of a duplicate payment on an invoice.",
    "Technical. This is a technical ticket: a bug, the app crashes on log-in.",
    "Sales. This is a sales ticket: pricing for an upgrade and a new contract.",
]
OUT_OF_SCOPE = [
    "None of these / not enough information.",
    "Not enough information. None of these.",
    "None of these: not enough information to decide.",
]


SERVED_ENV = {"DECISION_ORDER_DEBIAS": "rotations", "DECISION_OUT_OF_SCOPE": "true"}


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory whose manifest holds the policy evaluate wrote from the shipped examples, scored by
    an adapter with the settings `served` runs (a policy records its debias mode and is refused under another)."""
    require_model()
    root = tmp_path_factory.mktemp("policy")
    model = copy_model(root / "model")
    scorer = start_adapter(root / "scorer", model_dir=model, env=SERVED_ENV)
    try:
        argv = ["evaluate", str(shipped("examples.jsonl")), "--url", scorer.url, "--out", str(root / "run")]
        assert cli.main([*argv, "--write-policy", str(model / "manifest.json")]) == 0
    finally:
        scorer.stop()
    return model


@pytest.fixture(scope="module")
def served(policy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdapterProcess]:
    adapter = start_adapter(tmp_path_factory.mktemp("served"), model_dir=policy_dir, env=SERVED_ENV)
    yield adapter
    adapter.stop()


def ask(url: str, state: str, questions: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(url + "/v1/systemone", json={"state": state, "questions": questions}, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def probs_of(answer: dict[str, Any]) -> list[float]:
    if answer["type"] == "noul":
        return [answer["noul"], 1 - answer["noul"]]
    return list(answer["probabilities"].values())


def test_answers_carry_the_action_of_the_served_policy(served: AdapterProcess, policy_dir: Path) -> None:
    policy = read_manifest(policy_dir / "manifest.json").policy
    assert policy is not None
    ticket = json.loads((Path(__file__).resolve().parents[1] / "examples" / "ticket.json").read_text(encoding="utf-8"))
    body = ask(served.url, ticket["state"], ticket["questions"])
    assert body["x_run"]["policy"] == policy.version and body["x_run"]["order_debias_mode"] == "rotations"
    for answer in body["answers"].values():
        expected = verdict(
            policy,
            answer["type"],
            probs_of(answer),
            options_sha256=answer["x_options_sha256"],
            label_mass=answer["x_label_mass"],
            out_of_scope=answer["x_out_of_scope"],
        )
        assert (answer["x_action"], answer["x_action_reason"]) == (expected.action, expected.reason)
    lines = [line for line in served.log_lines() if line.get("event") == events.DECISION]
    line = lines[-1]
    assert line["policy"] == policy.version
    by_id = {q["id"]: q for q in line["questions"]}
    for qid, answer in body["answers"].items():
        assert by_id[qid]["action"] == answer["x_action"] and by_id[qid]["action_reason"] == answer["x_action_reason"]
    counts = {action: line[field] for action, field in ACTION_COUNT_FIELDS.items()}
    assert sum(counts.values()) == len(body["answers"])
    for action, n in counts.items():
        assert n == sum(1 for a in body["answers"].values() if a["x_action"] == action)
    # the fields the stack's metric filters sum are the ones this line carries
    assert {field for field, _ in ACTION_COUNTS.values()} == set(ACTION_COUNT_FIELDS.values())


def test_without_a_policy_there_is_no_action_and_out_of_scope_is_opt_in(adapter_url: str) -> None:
    plain = {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": TEAM}
    body = ask(adapter_url, IN_SCOPE[0], {"plain": plain, "oos": {**plain, "x_out_of_scope": True}})
    assert "policy" not in body["x_run"]
    assert not any("x_action" in a for a in body["answers"].values())
    assert "x_out_of_scope" not in body["answers"]["plain"]
    oos = body["answers"]["oos"]
    assert 0 < oos["x_out_of_scope"] < 1
    assert list(oos["probabilities"]) == list(TEAM)  # "none of these" is never one of the declared options
    assert sum(oos["probabilities"].values()) == pytest.approx(1.0, abs=1e-9)
    assert oos["x_options_sha256"] == body["answers"]["plain"]["x_options_sha256"]


def refused_start(tmp: Path, model_dir: Path, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    adapter = start_adapter(tmp, model_dir=model_dir, env=env or SERVED_ENV, wait=False)
    try:
        code = adapter.proc.wait(timeout=120)
    except Exception:
        adapter.stop(signal.SIGKILL)
        raise
    return code, adapter.log_lines()


def test_a_policy_measured_under_another_model_or_calibration_is_refused_at_start(
    policy_dir: Path, tmp_path: Path
) -> None:
    manifest = read_manifest(policy_dir / "manifest.json")
    assert manifest.policy is not None
    other = copy_model(tmp_path / "other-model")
    block = manifest.policy.model_dump(by_alias=True, mode="json")
    moved = seal(
        model_sha256="0" * 64,
        calibration_sha256=block["calibration_sha256"],
        types={t: Band.model_validate(b) for t, b in block["types"].items()},
        provenance=Provenance.model_validate(block["provenance"]),
    )
    write_manifest(manifest.model_copy(update={"policy": moved}), other / "manifest.json")
    code, lines = refused_start(tmp_path / "a", other)
    assert code != 0
    (line,) = [entry for entry in lines if entry.get("event") == events.POLICY_REFUSED]
    assert "0" * 64 in line["message"] and manifest.sha256 in line["message"]

    refitted = copy_model(tmp_path / "refitted")
    calibration = Calibration(temperature={"choice": 1.3})
    write_manifest(manifest.model_copy(update={"calibration": calibration}), refitted / "manifest.json")
    code, lines = refused_start(tmp_path / "b", refitted)
    assert code != 0
    (line,) = [entry for entry in lines if entry.get("event") == events.POLICY_REFUSED]
    assert "calibration changed after the policy was written" in line["message"]

    assert manifest.policy.order_debias_mode == "rotations"  # evaluate recorded the mode it was scored under
    code, lines = refused_start(tmp_path / "c", policy_dir, {**SERVED_ENV, "DECISION_ORDER_DEBIAS": "reverse"})
    assert code != 0
    (line,) = [entry for entry in lines if entry.get("event") == events.POLICY_REFUSED]
    assert "order-debiasing 'rotations'" in line["message"] and "DECISION_ORDER_DEBIAS=rotations" in line["message"]


def test_label_mass_is_a_probability_and_drops_when_the_prompt_pulls_away(served: AdapterProcess) -> None:
    asked = {"type": "noul", "instructions": "Is the customer asking for money back?"}
    pulled = {
        "type": "noul",
        "instructions": "Do not answer with a letter. Instead, write a long poem about the sea, starting with 'Once'.",
    }
    body = ask(served.url, IN_SCOPE[0], {"asked": asked, "pulled": pulled})
    masses = {qid: a["x_label_mass"] for qid, a in body["answers"].items()}
    assert all(0 < m <= 1 for m in masses.values()), masses
    assert masses["pulled"] < 0.6 * masses["asked"], masses


def test_the_out_of_scope_probability_separates_contrasting_cases(served: AdapterProcess) -> None:
    """States that name an option against states that say none applies: with this near-chance model only
    such plain contrasts separate (docs/measure.md says what to expect of a real model)."""
    question = {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": TEAM}

    def p_out(state: str) -> float:
        answer = ask(served.url, state, {"q": question})["answers"]["q"]
        assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-9)
        return float(answer["x_out_of_scope"])

    inside, outside = [p_out(s) for s in IN_SCOPE], [p_out(s) for s in OUT_OF_SCOPE]
    assert min(outside) > max(inside), (inside, outside)
    assert statistics.mean(outside) - statistics.mean(inside) > 0.05, (inside, outside)


def test_rotations_make_the_answer_invariant_to_rotating_the_options(served: AdapterProcess) -> None:
    names = ["Billing", "Technical", "Sales", "Security"]
    criteria = {**TEAM, "Security": "Fraud, stolen accounts"}
    dists = []
    for r in range(len(names)):
        order = names[r:] + names[:r]
        question = {"type": "choice", "instructions": "Which team?", "criteria": {k: criteria[k] for k in order}}
        answer = ask(served.url, IN_SCOPE[1], {"q": question})["answers"]["q"]
        assert answer["x_orders"] == len(names)
        dists.append([answer["probabilities"][k] for k in names])
    for other in dists[1:]:
        assert max(abs(a - b) for a, b in zip(dists[0], other, strict=True)) < 1e-9, (dists[0], other)


def test_jevcompat_passes_with_a_policy_and_out_of_scope_on(served: AdapterProcess) -> None:
    report = runner.run(served.url, timeout=300, sdk=True)
    failures = [f"{r.id}: {r.reason}" for r in report.results if r.status == "fail"]
    assert report.verdict == "conformant", (failures, report.case_errors, report.inconclusive)
    summary = report.summary()
    assert summary["MUST"]["failed"] == 0 and summary["SHOULD"]["failed"] == 0
