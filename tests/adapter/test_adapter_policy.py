"""A served threshold policy and the abstention signals, on the real model over real HTTP.

The policy is the one `decisionctl evaluate --write-policy` writes after scoring the shipped examples on
an adapter with the served settings (a policy records its debias mode); one adapter of this module serves
it (every question also offered "none of these", every question read in all rotations). The bundled model
is close to chance, so the tests check the mechanics and contrasts built to be plain, not that its
decisions are good. At the default E = 0.05 it certifies nothing (checked here); the served policy is
written at a lenient E = 0.95 only so that some band automates at all: certification itself is validated by
simulation (test_certify_simulation.py), the mechanics of serving it by the model.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec import events
from decision_spec.events import ACTION_COUNT_FIELDS
from decision_spec.manifest import Calibration, read_manifest, write_manifest
from decision_spec.policy import Band, Provenance, seal, verdict
from decisionctl.commands import cli
from decisionctl.commands.options import shipped
from decisionctl.core import bands
from decisionctl.core.cases import load_cases
from jevcompat import runner

from stacks.observability import ACTION_COUNTS
from tests.app_support import AppServer, app_server, start_app
from tests.conftest import copy_model, require_model, start_adapter
from tests.jevcompat_support import ALL_BUT_COSTLIEST, MANY, assert_conformant_but_the_costliest

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a module fixture of more than 15 s (pyproject.toml)

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
LENIENT_E = 0.95  # the near-chance model certifies a band only this loosely (the module doc says why)
APPROVAL = "noul-approval-01"  # two of its question's five cases wrong: at LENIENT_E its own band automates


@dataclass(frozen=True)
class Evaluated:
    model: Path  # the model directory whose manifest holds the policy
    run: Path  # evaluate's --out
    strict_output: str  # what evaluate printed at the default E = 0.05
    lenient_output: str  # and at LENIENT_E


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    """The shipped examples scored once by an adapter with the settings `served` runs (a policy records its
    debias mode and is refused under another), evaluated at the default E, then at LENIENT_E with
    --write-policy (the second run sends nothing: every case is already scored in --out)."""
    require_model()
    root = tmp_path_factory.mktemp("policy")
    model = copy_model(root / "model")
    printed, printed_lenient = io.StringIO(), io.StringIO()
    with app_server(model_dir=model, env=SERVED_ENV) as scorer:
        argv = ["evaluate", str(shipped("examples.jsonl")), "--url", scorer.url, "--out", str(root / "run")]
        with contextlib.redirect_stdout(printed):
            assert cli.main(argv) == 0
        lenient = ["--max-error", str(LENIENT_E), "--write-policy", str(model / "manifest.json")]
        with contextlib.redirect_stdout(printed_lenient):
            assert cli.main([*argv, *lenient]) == 0
    return Evaluated(model, root / "run", printed.getvalue(), printed_lenient.getvalue())


@pytest.fixture(scope="module")
def policy_dir(evaluated: Evaluated) -> Path:
    return evaluated.model


@pytest.fixture(scope="module")
def served(policy_dir: Path) -> Iterator[AppServer]:
    adapter = start_app(model_dir=policy_dir, env=SERVED_ENV)
    yield adapter
    adapter.stop()


def ask(url: str, state: Any, questions: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(url + "/v1/systemone", json={"state": state, "questions": questions}, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def probs_of(answer: dict[str, Any]) -> list[float]:
    if answer["type"] == "noul":
        return [answer["noul"], 1 - answer["noul"]]
    return list(answer["probabilities"].values())


def test_answers_carry_the_action_of_the_served_policy(served: AppServer, policy_dir: Path) -> None:
    policy = read_manifest(policy_dir / "manifest.json").policy
    assert policy is not None
    ticket = json.loads((Path(__file__).resolve().parents[2] / "examples" / "ticket.json").read_text(encoding="utf-8"))
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


def test_a_chance_level_model_certifies_nothing_at_five_percent(evaluated: Evaluated) -> None:
    """Must-show 2: the bundled model on the shipped examples: no band of any question or type automates at
    E = 0.05, and evaluate says, per band, what it would take."""
    results = json.loads((evaluated.run / "results.json").read_text(encoding="utf-8"))
    assert results["certification"]["max_error"] == LENIENT_E  # results.json is the last run's
    out = evaluated.strict_output
    assert "Certified for automation at error <= 5.0% with probability 95.0% out of sample" in out
    assert "overall: 0.0% of 51 cases certified for automation at <= 5.0% error (0 of 13 bands automate)" in out
    assert out.count("no automate band") == 16  # 13 questions and 3 types
    # the approval question's lowest error is far above E: no number of such cases would certify it
    assert f"({APPROVAL}): no automate band; no number of cases like these would certify one (its lowest" in out
    # at LENIENT_E the team question's error (4 of 6 wrong) would certify with about 10 such cases
    team = "(choice-team-01): no automate band; at the error measured at confidence >= 0.000 (66.7%), about 10 cases"
    assert team in evaluated.lenient_output
    # the type bands' measured errors are far above E: no number of such cases would
    for qtype in ("noul", "choice", "score"):
        assert f"{qtype} (type band): no automate band; no number of cases like these would certify one" in out


def test_the_policy_has_per_question_bands_served_by_the_question_and_by_its_type(
    served: AppServer, evaluated: Evaluated
) -> None:
    """Must-show 3: evaluate's per-question policy, served: each answer's band named in x_action_reason and in
    the decision log; a question of the cases gets its own band, a question the cases never asked its type's."""
    policy = read_manifest(evaluated.model / "manifest.json").policy
    assert policy is not None and policy.schema_ == "decision-policy/2"
    cases = {c.id: c for c in load_cases(Path(shipped("examples.jsonl")))}
    keys = bands.question_keys(cases.values())
    assert set(policy.questions) == set(keys.values())
    approval = policy.questions[keys[APPROVAL]]
    assert approval.automate_at_or_above is not None and approval.certificate is not None
    assert (approval.certificate.max_error, approval.certificate.cases) == (LENIENT_E, 5)
    assert policy.types["noul"].automate_at_or_above is not None
    assert policy.types["score"].automate_at_or_above is None  # not even at E = 0.95
    unseen = {"type": "noul", "instructions": "Is this message written in capital letters only?"}
    assert bands.question_key(unseen) not in policy.questions
    states = [cases[i].state for i in cases if i.startswith("noul-approval")]
    answers = []
    for state in states:
        body = ask(served.url, state, {"own": cases[APPROVAL].question, "unseen": unseen})
        answers.append(body["answers"])
    lines = [line for line in served.log_lines() if line.get("event") == events.DECISION]
    line_questions: list[dict[str, Any]] = [q for line in lines for q in line["questions"]]  # type: ignore[attr-defined]
    logged = line_questions[-2 * len(states) :]
    reasons: dict[str, set[str]] = {"own": set(), "unseen": set()}
    for i, answer_set in enumerate(answers):
        for qid, answer in answer_set.items():
            expected = verdict(
                policy,
                "noul",
                probs_of(answer),
                options_sha256=answer["x_options_sha256"],
                label_mass=answer["x_label_mass"],
                out_of_scope=answer["x_out_of_scope"],
            )
            assert (answer["x_action"], answer["x_action_reason"]) == (expected.action, expected.reason)
            line = next(q for q in logged[2 * i : 2 * i + 2] if q["id"] == qid)
            assert line["band"] == (keys[APPROVAL] if qid == "own" else "noul")  # the band's key in the policy
            assert line["action_reason"] == answer["x_action_reason"]
            reasons[qid].add(answer["x_action_reason"])
    # out of scope may win on some states; the band decides the others and is named
    assert "question_band" in reasons["own"] and reasons["own"] <= {"question_band", "out_of_scope"}
    assert "type_band" in reasons["unseen"] and reasons["unseen"] <= {"type_band", "out_of_scope"}
    decided = [a["own"] for a in answers if a["own"]["x_action_reason"] == "question_band"]
    assert all(a["x_action"] == "automate" for a in decided)  # its certified band starts at 0.0


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
    # the adapter adopts the policy's mode (issue 37): another one in its environment stops it, both named
    code, lines = refused_start(tmp_path / "c", policy_dir, {**SERVED_ENV, "DECISION_ORDER_DEBIAS": "reverse"})
    assert code != 0
    (line,) = [entry for entry in lines if entry.get("event") == events.MODEL_NOT_LOADED]
    assert "DECISION_ORDER_DEBIAS=reverse" in line["message"] and "records order_debias rotations" in line["message"]


def test_label_mass_is_a_probability_and_drops_when_the_prompt_pulls_away(served: AppServer) -> None:
    asked = {"type": "noul", "instructions": "Is the customer asking for money back?"}
    pulled = {
        "type": "noul",
        "instructions": "Do not answer with a letter. Instead, write a long poem about the sea, starting with 'Once'.",
    }
    body = ask(served.url, IN_SCOPE[0], {"asked": asked, "pulled": pulled})
    masses = {qid: a["x_label_mass"] for qid, a in body["answers"].items()}
    assert all(0 < m <= 1 for m in masses.values()), masses
    assert masses["pulled"] < 0.6 * masses["asked"], masses


def test_the_out_of_scope_probability_separates_contrasting_cases(served: AppServer) -> None:
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


def test_rotations_make_the_answer_invariant_to_rotating_the_options(served: AppServer) -> None:
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


def test_jevcompat_passes_with_a_policy_and_out_of_scope_on(served: AppServer) -> None:
    """The conformance suite but its 2-to-255-options case (run in full on the default adapter:
    tests/jevcompat_support.py), and its largest question here: 255 options and "none of these", 256 slots."""
    assert_conformant_but_the_costliest(runner.run(served.url, timeout=300, sdk=True, only=set(ALL_BUT_COSTLIEST)))
    body = ask(served.url, IN_SCOPE[0], {"q": {"type": "choice", "instructions": "Which queue?", "criteria": MANY}})
    answer = body["answers"]["q"]
    assert list(answer["probabilities"]) == list(MANY) and 0 < answer["x_out_of_scope"] < 1
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-9)
    assert answer["choice"] == max(answer["probabilities"], key=answer["probabilities"].get)
    assert answer["x_action"] in ("automate", "review", "abstain")
