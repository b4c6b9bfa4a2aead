"""The arithmetic behind `evaluate`: metrics, thresholds, temperature fitting, the labeled format and the log.

Hand-made predictions stand in for an endpoint here on purpose: these tests check formulas against
numbers worked out by hand, and that the fit recovers a temperature known in advance. The endpoint
itself is exercised in test_decisionctl_evaluate.py.
"""

from __future__ import annotations

import json
import math
import random
from importlib import resources
from pathlib import Path

import pytest
from decisionctl.commands import cli
from decisionctl.core import metrics, scoring, temperatures
from decisionctl.core.cases import (
    CaseError,
    case_digest,
    load_cases,
    parse_case,
    prediction_from_response,
)
from decisionctl.core.labeled import IDENTITY, PREDICTIONS, Prediction
from decisionctl.core.replies import read_response
from decisionctl.core.results import RESULTS
from decisionctl.core.scoring import PredictionLog
from jevcompat import mock

from tests.decisionctl_support import reply, x_run

ROOT = Path(__file__).resolve().parents[2]


def pred(pid: str, probs: list[float], expected: int, qtype: str = "choice", temperature: float = 1.0) -> Prediction:
    options = ["yes", "no"] if qtype == "noul" else [f"o{i}" for i in range(len(probs))]
    predicted = (0 if probs[0] >= 0.5 else 1) if qtype == "noul" else max(range(len(probs)), key=lambda i: probs[i])
    return Prediction(pid, qtype, options, probs, expected, predicted, probs[predicted], None, temperature, "", 0.0)


def test_brier_ece_and_macro_f1_by_hand() -> None:
    preds = [pred("a", [0.9, 0.1], 0), pred("b", [0.8, 0.2], 1), pred("c", [0.3, 0.7], 1), pred("d", [0.35, 0.65], 0)]
    # Brier: sum over options of (p - y)^2, mean over cases
    assert metrics.brier(preds) == pytest.approx((0.02 + 1.28 + 0.18 + 0.845) / 4)
    # confidences 0.9, 0.8, 0.7, 0.65 fall in bins 9, 8, 7, 6, one case each: |acc - conf| = 0.1, 0.8, 0.3, 0.65
    assert metrics.ece(preds) == pytest.approx((0.1 + 0.8 + 0.3 + 0.65) / 4)
    # o0: tp 1, fp 1, fn 1 -> 0.5; o1: tp 1, fp 1, fn 1 -> 0.5
    assert metrics.macro_f1(preds) == pytest.approx(0.5)
    assert metrics.accuracy(preds) == 0.5


def test_ece_bins_are_half_open_and_one_lands_in_the_last() -> None:
    bins = metrics.reliability_bins([pred("a", [1.0, 0.0], 0), pred("b", [0.5, 0.5], 1), pred("c", [0.1, 0.9], 1)])
    assert [b.count for b in bins] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins[5].accuracy == 0.0 and bins[9].accuracy == 1.0


def test_noul_predicts_yes_at_one_half_with_confidence_max_p() -> None:
    case = parse_case(1, {"id": "n", "state": "s", "question": {"type": "noul"}, "expected": False})
    p = prediction_from_response(case, reply({"type": "noul", "noul": 0.5}), 0.1)
    assert (p.predicted_index, p.confidence, p.correct, p.model_sha256) == (0, 0.5, False, "")
    p = prediction_from_response(case, reply({"type": "noul", "noul": 0.2}, run=x_run(temperature={"noul": 1.5})), 0.1)
    assert (p.predicted_index, p.confidence, p.correct, p.temperature) == (1, 0.8, True, 1.5)
    assert p.model_sha256 == "ab" * 32


def test_replies_of_the_reference_server_are_read_with_the_adapters_response_models() -> None:
    """jevcompat's spec-exact mock sends no x_ fields; every shipped case reads from its replies."""
    cases = load_cases(Path(str(resources.files("decisionctl").joinpath("data", "examples.jsonl"))))
    for case in cases:
        body = mock.respond(mock.MockConfig(), case.request())
        p = prediction_from_response(case, read_response(body), 0.0)
        answer = body["answers"]["q"]
        if case.type == "noul":
            assert p.probs == [answer["noul"], 1 - answer["noul"]]
        else:
            assert p.probs == [answer["probabilities"][o] for o in case.options]
            assert p.contract_confidence == answer["confidence"]
        assert (p.temperature, p.model_sha256) == (1.0, "")
    assert {c.type for c in cases} == {"noul", "choice", "score"}


def test_a_reply_that_departs_from_the_models_is_named_without_its_values() -> None:
    body = {"model": "m", "answers": {"q": {"type": "choice", "choice": "secret text", "confidence": 0.5}}}
    with pytest.raises(ValueError, match=r"^answers\.q\.choice\.probabilities: Field required \(and 1 more\)$") as e:
        read_response(body)
    assert "secret" not in str(e.value)


def test_the_temperature_in_force_is_the_bucket_value_when_the_model_sets_one() -> None:
    """A decision-tuned GGUF may set temperatures per option-count bucket; x_run lists them beside the type's."""
    in_force = x_run(temperature={"choice": 1.0, "choice.3_5": 0.7})

    def temperature(n: int) -> float:
        criteria = {f"o{i}": None for i in range(n)}
        case = parse_case(
            1, {"id": "c", "state": "s", "question": {"type": "choice", "criteria": criteria}, "expected": "o0"}
        )
        probabilities = {f"o{i}": 1 / n for i in range(n)}
        answer = {"type": "choice", "choice": "o0", "probabilities": probabilities, "confidence": 0.0}
        return prediction_from_response(case, reply(answer, run=in_force), 0.1).temperature

    assert (temperature(2), temperature(4), temperature(8)) == (1.0, 0.7, 1.0)
    mixed = [pred(f"b{i}", [0.6, 0.4], 0, temperature=t) for i, t in enumerate([1.0, 0.7])]
    with pytest.raises(ValueError, match="per option count"):
        temperatures.fit(mixed)


def test_recommendation_picks_the_lowest_threshold_meeting_the_target_with_support() -> None:
    high = [pred(f"h{i}", [0.95, 0.05], 0) for i in range(6)]  # all right
    mid = [pred(f"m{i}", [0.7, 0.3], 0 if i < 3 else 1) for i in range(5)]  # 3 of 5 right
    low = [pred(f"l{i}", [0.55, 0.45], 1) for i in range(5)]  # all wrong
    rec = metrics.recommend(high + mid + low, 0.9, min_support=5)
    assert rec["automate_at_or_above"] == 0.75 and rec["automate"]["cases"] == 6
    assert rec["review_band"] == [0.6, 0.75] and rec["review"]["cases"] == 5
    assert rec["abstain_below"] == 0.6 and rec["abstain"]["cases"] == 5
    assert metrics.recommend(mid + low, 0.9)["automate_at_or_above"] is None
    # --review-accuracy reaches the recommendation: the mid band (3 of 5 right) is not worth a review at 0.7
    args = cli.build_parser().parse_args(["evaluate", "cases.jsonl", "--url", "http://x", "--review-accuracy", "0.7"])
    strict = metrics.report(high + mid + low, 0.9, review_accuracy=args.review_accuracy)["recommendation"]["overall"]
    assert strict["review"]["cases"] == 0 and strict["abstain"]["cases"] == 10


def test_fit_recovers_a_known_temperature() -> None:
    """Served probabilities are softmax(s); labels are drawn from softmax(s / 2): the fit must find T close to 2."""
    rng = random.Random(7)
    preds = []
    for i in range(3000):
        scores = [rng.gauss(0, 3) for _ in range(3)]
        served = temperatures.sharpen([math.exp(s) for s in scores], 1.0)
        truth = temperatures.sharpen(served, 0.5)
        label = rng.choices(range(3), weights=truth)[0]
        preds.append(pred(f"c{i}", served, label))
    result = temperatures.fit(preds, holdout=0.5, seed=1)
    assert result["per_type"]["choice"]["applied"] and not result["per_type"]["choice"]["at_search_bound"]
    assert result["per_type"]["choice"]["temperature"] == pytest.approx(2.0, rel=0.1)
    assert result["improved"] and result["heldout_ece_after"] < result["heldout_ece_before"] / 2
    block = temperatures.to_calibration(result, {"cases_file": "synthetic"})
    assert block.for_type("choice") == pytest.approx(2.0, rel=0.1) and block.for_type("noul") == 1.0


def test_fit_is_relative_to_the_temperature_in_force() -> None:
    """With T0 = 2 already applied, an exponent a means T = T0 / a."""
    rng = random.Random(3)
    preds = []
    for i in range(2000):
        served = temperatures.sharpen([rng.random() + 1e-3 for _ in range(2)], 4.0)
        label = rng.choices(range(2), weights=temperatures.sharpen(served, 0.5))[0]
        preds.append(pred(f"n{i}", served, label, qtype="noul", temperature=2.0))
    per_type = temperatures.fit(preds, holdout=0.3, seed=0)["per_type"]["noul"]
    assert per_type["temperature_before"] == 2.0
    assert per_type["fitted_temperature"] == pytest.approx(2.0 / per_type["exponent"])
    assert per_type["fitted_temperature"] == pytest.approx(4.0, rel=0.15)


def test_split_is_seeded_and_per_type() -> None:
    preds = [pred(f"c{i}", [0.6, 0.4], 0) for i in range(10)] + [pred(f"n{i}", [0.6, 0.4], 0, "noul") for i in range(5)]
    fit_a, held_a = temperatures.split(preds, 0.4, seed=5)
    _, held_b = temperatures.split(list(reversed(preds)), 0.4, seed=5)
    assert [p.id for p in held_a] == [p.id for p in held_b]
    assert sorted(p.type for p in held_a) == ["choice"] * 4 + ["noul"] * 2
    assert {p.id for p in fit_a} | {p.id for p in held_a} == {p.id for p in preds}


def test_golden_section_finds_a_minimum() -> None:
    assert temperatures.golden_section(lambda x: (x - 0.3) ** 2, -2, 2) == pytest.approx(0.3, abs=1e-4)


def test_labeled_file_errors_name_the_line(tmp_path) -> None:
    good = {"id": "a", "state": "s", "question": {"type": "score", "criteria": ["lo", "hi"]}, "expected": 1}
    cases = [
        ({**good, "expected": 2}, "line 2: a score case expects a level index 0..1"),
        ({**good, "expected": True}, "line 2: a score case expects a level index"),
        (
            {**good, "question": {"type": "choice", "criteria": {"x": None, "y": None}}, "expected": "z"},
            "line 2: expected 'z' is not one of the options",
        ),
        ({**good, "question": {"type": "noul"}, "expected": "yes"}, "line 2: a noul case expects true or false"),
        (good, "line 2: duplicate case id 'a'"),
    ]
    for bad, message in cases:
        path = tmp_path / "cases.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(CaseError, match=message):
            load_cases(path)


def test_the_shipped_example_set_is_valid_and_covers_every_type() -> None:
    path = resources.files("decisionctl").joinpath("data/examples.jsonl")
    cases = load_cases(path)  # type: ignore[arg-type]
    counts = {t: sum(c.type == t for c in cases) for t in ("noul", "choice", "score")}
    assert len(cases) >= 40 and min(counts.values()) >= 12


def test_prediction_log_cuts_a_line_torn_by_a_kill(tmp_path) -> None:
    log = PredictionLog(tmp_path / "predictions.jsonl")
    log.append({"id": "a", "x": 1})
    with log.path.open("a") as f:
        f.write('{"id": "b", "x"')  # what a SIGKILL in the middle of a write leaves
    assert list(log.load()) == ["a"]
    log.append({"id": "c", "x": 3})
    assert list(log.load()) == ["a", "c"]


def test_a_temperature_that_does_not_lower_its_types_heldout_ece_is_not_applied() -> None:
    """Fit part: always right at 0.6 (the fit sharpens); held-out part: right half the time (sharpening hurts)."""
    template = [pred(f"n{i:02d}", [0.6, 0.4], 0, "noul", temperature=1.5) for i in range(20)]
    _, held = temperatures.split(template, 0.4, seed=0)
    held_ids = {p.id for p in held}
    flip = sorted(held_ids)[: len(held_ids) // 2]
    preds = [pred(p.id, [0.6, 0.4], 1 if p.id in flip else 0, "noul", temperature=1.5) for p in template]
    result = temperatures.fit(preds, holdout=0.4, seed=0)
    noul = result["per_type"]["noul"]
    assert noul["fitted_temperature"] < 1.5 / 5  # the fit part asks for much sharper probabilities
    assert noul["heldout_ece_after"] > noul["heldout_ece_before"]
    assert not noul["applied"] and noul["temperature"] == 1.5  # so the temperature in force is kept
    assert not result["improved"] and result["heldout_ece_after"] == pytest.approx(result["heldout_ece_before"])
    assert temperatures.to_calibration(result, {}).for_type("noul") == 1.5


def test_a_saved_identity_the_models_cannot_read_stops_the_run_before_anything_is_sent(tmp_path) -> None:
    case = parse_case(1, {"id": "n", "state": "s", "question": {"type": "noul"}, "expected": True})
    (tmp_path / IDENTITY).write_text(json.dumps({"model_sha256": "ab" * 32}))  # a partial x_run
    with pytest.raises(scoring.IdentityChanged, match=r"is not a run identity .*\(model_file: Field required"):
        scoring.score_cases([case], sender=None, out=tmp_path)  # nothing is sent


def _saved_run(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """A labeled file of `count` yes/no cases and an evaluate directory holding a prediction for each."""
    cases_path, out = tmp_path / "cases.jsonl", tmp_path / "run"
    rows = [
        {
            "id": f"n{i}",
            "state": f"ticket {i}",
            "question": {"type": "noul", "instructions": "Refund?"},
            "expected": i < 4,
        }
        for i in range(count)
    ]
    cases_path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out.mkdir()
    log = PredictionLog(out / PREDICTIONS)
    for i, case in enumerate(load_cases(cases_path)):
        answer = reply({"type": "noul", "noul": 0.9 if i % 3 else 0.2}, run=x_run())
        log.append({**prediction_from_response(case, answer, 0.01).to_json(), "case_sha256": case_digest(case)})
    (out / IDENTITY).write_text(json.dumps(x_run()), encoding="utf-8")
    return cases_path, out


def test_evaluate_reports_on_saved_predictions_without_an_endpoint(tmp_path: Path, capsys) -> None:
    """outcomes' evaluate/ directory (or an earlier run) is reported on with no --url or --sagemaker-endpoint."""
    cases_path, out = _saved_run(tmp_path, 8)
    assert cli.main(["evaluate", str(cases_path), "--out", str(out)]) == 0
    assert "0 cases sent, 8 already scored" in capsys.readouterr().err
    results = json.loads((out / RESULTS).read_text(encoding="utf-8"))
    assert (results["scored"], results["sent_this_run"], results["metrics"]["overall"]["cases"]) == (8, 0, 8)
    with cases_path.open("a", encoding="utf-8") as f:  # a case no saved prediction answers: named, nothing sent
        f.write(json.dumps({"id": "new", "state": "s", "question": {"type": "noul"}, "expected": True}) + "\n")
    assert cli.main(["evaluate", str(cases_path), "--out", str(out)]) == 1
    said = capsys.readouterr().err
    assert "1 of 9 cases have no saved prediction" in said and "give --url or --sagemaker-endpoint" in said
    assert cli.main(["evaluate", str(cases_path), "--out", str(out), "--restart"]) == 1  # would forget the 8
    assert "--restart forgets the saved predictions" in capsys.readouterr().err
    assert len(PredictionLog(out / PREDICTIONS).load()) == 8


def test_evaluate_writes_its_runs_outside_the_committed_evaluation_folder() -> None:
    """evaluation/ holds the suites and records cdk.json binds; a run's predictions and figures go elsewhere."""
    environments = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]["environments"]
    committed = {Path(env["evaluation"][key]).parent for env in environments.values() for key in ("suite", "record")}
    out = Path(cli.build_parser().parse_args(["evaluate"]).out)
    assert out == Path("evaluate") and out not in committed
