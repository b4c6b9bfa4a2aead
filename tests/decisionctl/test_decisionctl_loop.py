"""The production loop on the real model over real HTTP: output-only capture holds no request text,
`decisionctl outcomes` joins captured answers with final answers into labeled cases that `evaluate` reads
without sending anything, and `decisionctl compare --shadow` compares two variants' captured answers.

Two adapters on the bundled model stand for a production and a shadow variant: production with the
manifest's calibration and the default order-debiasing, the shadow with a choice temperature of 2 and
debiasing off; each serves a threshold policy bound to its own calibration (test configuration: bands
picked so the tiny model's answers fall on both sides, with a 5 % certificate the traffic can contradict).
SageMaker's capture writer is stood in for by tests/capture_support.py, which wraps each real response
body as an output-only capture record in SageMaker's layout.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec.manifest import Calibration, read_manifest, write_manifest
from decision_spec.policy import Band, Certificate, Provenance, seal
from decisionctl.commands import cli
from decisionctl.core.cases import load_cases

from tests import capture_support
from tests.app_support import start_app
from tests.conftest import MODEL_SHA256, copy_model, require_model

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a module fixture of more than 15 s (pyproject.toml)

TEAMS = {"Billing": "payments, invoices, refunds", "Technical": "bugs, outages, log-in", "Sales": "pricing, plans"}
INSTRUCTIONS = {"urgent": "Does this ticket need a reply within the hour?", "team": "Which team owns this ticket?"}
QUESTIONS = {
    "urgent": {"type": "noul", "instructions": INSTRUCTIONS["urgent"]},
    "team": {"type": "choice", "instructions": INSTRUCTIONS["team"], "criteria": TEAMS},
}
STATES = [
    "Customer 88121 (Ann Lee): my card was charged twice for invoice 7781, please refund one.",
    "Customer 88122: the app crashes at log-in since this morning, our whole staff is blocked.",
    "Customer 88123: what does the enterprise plan cost for 40 seats?",
    "Customer 88124: I cannot reset my password, the link in the mail is expired.",
    "Customer 88125: cancel my subscription and refund the rest of the year.",
    "Customer 88126: your outage yesterday cost us a day of sales.",
    "Customer 88127: is there a discount for nonprofits?",
    "Customer 88128: error 500 on every page of the dashboard.",
]
ENDPOINT = "decision-prod"


def certified(automate: float, review: float | None) -> Band:
    certificate = Certificate(
        method="test-configuration",
        max_error=0.05,
        confidence=0.95,
        labels_sha256="0" * 64,
        cases=100,
        automated=60,
        errors=1,
        bound=0.05,
    )
    return Band(automate_at_or_above=automate, review_at_or_above=review, support=100, certificate=certificate)


def serve_policy(model: Path, calibration: Calibration | None) -> None:
    manifest = read_manifest(model / "manifest.json").model_copy(update={"calibration": calibration})
    policy = seal(
        model_sha256=MODEL_SHA256,
        calibration_sha256=manifest.calibration_sha256(),
        # noul: max(p, 1 - p) >= 0.5 always, so every urgent answer is automated; team spreads over the bands
        types={"noul": certified(0.5, None), "choice": certified(0.5, 0.3)},
        provenance=Provenance(
            cases_file="traffic.jsonl",
            cases_sha256="0" * 64,
            target_accuracy=0.95,
            min_support=5,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
    )
    write_manifest(manifest.model_copy(update={"policy": policy}), model / "manifest.json")


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same eight requests answered by both variants, each response wrapped as SageMaker captures it
    (one InferenceId per invocation, shared by the production and the shadow copy)."""
    require_model()
    root = tmp_path_factory.mktemp("loop")
    variants = {
        "AllTraffic": (None, {}),
        "Shadow": (Calibration(temperature={"choice": 2.0}), {"DECISION_ORDER_DEBIAS": "off"}),
    }
    bodies: dict[str, list[bytes]] = {}
    for variant, (calibration, env) in variants.items():
        model = copy_model(root / variant / "model")
        serve_policy(model, calibration)
        adapter = start_app(model_dir=model, env=env)
        try:
            bodies[variant] = [
                httpx.post(
                    adapter.url + "/v1/systemone", json={"state": s, "questions": QUESTIONS}, timeout=300
                ).content
                for s in STATES
            ]
        finally:
            adapter.stop()
        records = [capture_support.record(b, inference_id=f"ticket-{i}") for i, b in enumerate(bodies[variant])]
        capture_support.write(root / "capture", ENDPOINT, variant, records)
    return {
        "root": root,
        "capture": root / "capture" / ENDPOINT,
        "dead_url": adapter.url,  # stopped: anything sent to it fails
        "bodies": bodies,
        "replies": {v: [json.loads(b) for b in bs] for v, bs in bodies.items()},
    }


def pick(answer: dict[str, Any]) -> str:
    if answer["type"] == "noul":
        return "yes" if answer["noul"] >= 0.5 else "no"
    return str(answer["choice"])


def test_output_only_capture_holds_no_request_text(traffic: dict[str, Any]) -> None:
    for variant in ("AllTraffic", "Shadow"):
        text = (traffic["capture"] / capture_support.key("", variant)[1:]).read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines()]
        assert len(lines) == len(STATES)
        assert all(set(line["captureData"]) == {"endpointOutput"} for line in lines)
        for secret in [*STATES, "Ann Lee", "88121", *INSTRUCTIONS.values(), *TEAMS.values()]:
            assert secret not in text
        for line, reply in zip(lines, traffic["replies"][variant], strict=True):
            assert reply["x_run"]["request_id"] in line["captureData"]["endpointOutput"]["data"]
            assert MODEL_SHA256 in line["captureData"]["endpointOutput"]["data"]


def test_outcomes_make_labeled_cases_that_evaluate_scores_without_sending(
    traffic: dict[str, Any], tmp_path: Path
) -> None:
    replies = traffic["replies"]["AllTraffic"]
    rows = ["request_id,question_id,final_answer,note"]
    reversed_by = Counter[str]()
    finals: dict[str, str] = {}
    for i, reply in enumerate(replies):
        name = reply["x_run"]["request_id"] if i % 2 == 0 else f"ticket-{i}"  # either id the caller kept
        urgent, team = reply["answers"]["urgent"], reply["answers"]["team"]
        flip_urgent, change_team = i < 3, i >= 6
        final_urgent = {"yes": "no", "no": "yes"}[pick(urgent)] if flip_urgent else pick(urgent)
        final_team = next(t for t in TEAMS if t != team["choice"]) if change_team else team["choice"]
        rows.append(f"{name},urgent,{final_urgent == 'yes'},x")
        finals[f"{reply['x_run']['request_id']}/urgent"] = final_urgent
        if i < 7:  # the last team answer gets an invalid final below
            rows.append(f"{name},team,{final_team},x")
            finals[f"{reply['x_run']['request_id']}/team"] = final_team
        for qid, changed in (("urgent", flip_urgent), ("team", change_team and i < 7)):
            if reply["answers"][qid]["x_action"] == "automate":
                reversed_by[qid] += changed
    rows += [
        "no-such-request,urgent,true,x",
        "ticket-1,no-such-question,true,x",
        "ticket-7,team,Marketing,x",
        f"ticket-2,urgent,{finals[replies[2]['x_run']['request_id'] + '/urgent'] == 'yes'},x",
    ]  # the last: the decision a row above named by request id, named again by InferenceId (superseded)
    (tmp_path / "outcomes.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "joined"
    manifest = traffic["root"] / "AllTraffic" / "model" / "manifest.json"
    argv = [
        "outcomes",
        str(traffic["capture"]),
        "--variant",
        "AllTraffic",
        "--outcomes",
        str(tmp_path / "outcomes.csv"),
    ]
    assert cli.main([*argv, "--policy", str(manifest), "--out", str(out)]) == 0

    cases = load_cases(out / "cases.jsonl")  # evaluate's own reader
    assert len(cases) == 2 * len(STATES) - 1
    assert {c.id: c.options[c.expected_index] for c in cases} == finals
    assert all(c.state is None for c in cases) and STATES[0] not in (out / "cases.jsonl").read_text()

    report = json.loads((out / "outcomes.json").read_text())
    assert report["unmatched"] == {
        "final answer not an option (a choice final answer is one of the question's option names)": 1,
        "no captured answer has this request id": 1,
        "the captured answer has no such question id": 1,
    }
    assert report["superseded_rows"] == 1 and report["captured_without_outcome"] == 0
    for qid, joined in (("urgent", replies), ("team", replies[:7])):
        automated = sum(r["answers"][qid]["x_action"] == "automate" for r in joined)
        q = report["questions"][qid]
        assert (q["joined"], q["automated"], q["reversed"]) == (len(joined), automated, reversed_by[qid])
        assert q["reversal_rate"] == (reversed_by[qid] / automated if automated else None)
    assert report["questions"]["urgent"]["reversal_rate"] == 3 / 8  # every urgent answer is automated
    bands = report["bands"]
    served = Counter(
        r["answers"][q]["x_action"]
        for r in replies
        for q in ("urgent", "team")
        if f"{r['x_run']['request_id']}/{q}" in finals
    )
    assert bands["actions"] == dict(served)  # the policy's verdicts recomputed from the capture match the served ones
    noul = bands["bands"]["type noul"]
    assert (noul["automated"], noul["errors"], noul["promised"]["max_error"]) == (8, 3, 0.05)
    assert noul["exceeded"] is True  # 3 of 8 wrong cannot happen at 5 % (p = 0.0058)

    evaluated = out / "evaluate"
    assert cli.main(["evaluate", str(out / "cases.jsonl"), "--out", str(evaluated), "--url", traffic["dead_url"]]) == 0
    results = json.loads((evaluated / "results.json").read_text())
    assert (results["sent_this_run"], results["reused_from_earlier_runs"], results["scored"]) == (0, 15, 15)
    agreed = sum(
        pick(r["answers"][q]) == finals[f"{r['x_run']['request_id']}/{q}"]
        for r in replies
        for q in ("urgent", "team")
        if f"{r['x_run']['request_id']}/{q}" in finals
    )
    assert results["metrics"]["overall"]["accuracy"] == pytest.approx(agreed / 15)
    by_id = {p["id"]: p for p in results["predictions"]}
    first = replies[0]
    assert by_id[f"{first['x_run']['request_id']}/team"]["probs"] == list(
        first["answers"]["team"]["probabilities"].values()
    )
    assert results["identity"]["model_sha256"] == MODEL_SHA256


def test_compare_shadow_reports_agreement_and_shifts(traffic: dict[str, Any], tmp_path: Path) -> None:
    base, new = traffic["replies"]["AllTraffic"], traffic["replies"]["Shadow"]
    out = tmp_path / "shadow"
    argv = ["compare", "--shadow", str(traffic["capture"]), "--production-variant", "AllTraffic", "--out", str(out)]
    assert cli.main(argv) == 0
    report = json.loads((out / "shadow.json").read_text())
    assert report["paired"] == len(STATES) and report["unpaired"] == {"production": 0, "shadow": 0}
    expected = [
        (f"ticket-{i}", q, pick(b["answers"][q]), pick(n["answers"][q]))
        for i, (b, n) in enumerate(zip(base, new, strict=True))
        for q in ("team", "urgent")
        if pick(b["answers"][q]) != pick(n["answers"][q])
    ]
    got = sorted((d["key"], d["question_id"], d["production"], d["shadow"]) for d in report["disagreements"])
    assert got == sorted(expected)
    for qid in ("urgent", "team"):
        q = report["questions"][qid]
        agree = sum(pick(b["answers"][qid]) == pick(n["answers"][qid]) for b, n in zip(base, new, strict=True))
        assert q["agreement"] == agree / len(STATES)
        for side, replies in (("production", base), ("shadow", new)):
            actions = Counter(r["answers"][qid]["x_action"] for r in replies)
            assert q["action_share"][side] == {a: n / len(STATES) for a, n in sorted(actions.items())}
            assert q["option_mix"][side] == {
                o: n / len(STATES) for o, n in sorted(Counter(pick(r["answers"][qid]) for r in replies).items())
            }
    assert report["questions"]["team"]["mean_total_variation"] > 0.01  # temperature 2 flattens every team answer
    identity = report["identity"]
    assert identity["production"]["calibration"] != identity["shadow"]["calibration"]
    assert identity["production"]["order_debias_mode"] == ["reverse"] and identity["shadow"]["order_debias_mode"] == [
        "off"
    ]

    two = tmp_path / "two"
    sides = [str(traffic["capture"] / v) for v in ("AllTraffic", "Shadow")]
    assert cli.main(["compare", "--shadow", *sides, "--out", str(two)]) == 0
    again = json.loads((two / "shadow.json").read_text())
    assert again["questions"] == report["questions"] and again["shadow"]["variant"] == "Shadow"
