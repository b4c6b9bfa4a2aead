"""The threshold policy as data: sealing, binding to a model and calibration, and the action per answer.

Pure functions on hand-made numbers: the adapter serving a policy is tested in test_adapter_policy.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from decision_spec.manifest import Calibration, Manifest, calibration_sha256, read_manifest, write_manifest
from decision_spec.policy import Band, Certificate, Policy, PolicyError, Provenance, QuestionBand, seal, verdict
from decisionctl.core.cases import parse_case, prediction_from_response
from pydantic import ValidationError

from tests.decisionctl_support import reply

MODEL = "b" * 64
OTHER_MODEL = "c" * 64
QUESTION = "0123456789abcdef"
PROVENANCE = Provenance(
    cases_file="cases.jsonl",
    cases_sha256="a" * 64,
    target_accuracy=0.9,
    min_support=5,
    review_accuracy=0.5,
    created="2026-12-01",
)


CERTIFICATE = Certificate(
    method="fallback-clopper-pearson/1",
    max_error=0.05,
    confidence=0.95,
    labels_sha256="e" * 64,
    cases=20,
    automated=12,
    errors=0,
    bound=0.22,
)


def band(automate: float | None, review: float | None, **kwargs: object) -> Band:
    return Band(automate_at_or_above=automate, review_at_or_above=review, support=20, certificate=CERTIFICATE, **kwargs)


def make_policy(**overrides: object) -> Policy:
    kwargs: dict[str, object] = {
        "model_sha256": MODEL,
        "calibration_sha256": calibration_sha256(None),
        "types": {"noul": band(0.9, 0.6), "choice": band(None, 0.35)},
        "provenance": PROVENANCE,
    }
    kwargs.update(overrides)
    return seal(**kwargs)  # type: ignore[arg-type]


def test_the_version_is_a_hash_of_the_content_without_the_date() -> None:
    policy = make_policy()
    assert len(policy.version) == 16
    later = make_policy(provenance=PROVENANCE.model_copy(update={"created": "2027-01-31"}))
    assert later.version == policy.version
    moved = make_policy(types={"noul": band(0.95, 0.6)})
    assert moved.version != policy.version
    other_cases = make_policy(provenance=PROVENANCE.model_copy(update={"cases_sha256": "d" * 64}))
    assert other_cases.version != policy.version


def test_an_edited_policy_is_refused_with_the_hash_it_should_carry() -> None:
    block = make_policy().model_dump(by_alias=True, mode="json")
    block["types"]["noul"]["automate_at_or_above"] = 0.8
    with pytest.raises(ValidationError, match="does not match its content") as err:
        Policy.model_validate(block)
    resealed = seal(
        model_sha256=MODEL,
        calibration_sha256=calibration_sha256(None),
        types={t: Band.model_validate(b) for t, b in block["types"].items()},
        provenance=PROVENANCE,
    )
    assert resealed.version in str(err.value)


def test_a_review_threshold_above_the_automation_threshold_is_refused() -> None:
    with pytest.raises(ValidationError, match="above automate_at_or_above"):
        Band(automate_at_or_above=0.6, review_at_or_above=0.7)


def test_a_certified_policy_needs_a_certificate_on_every_band_and_records_it() -> None:
    with pytest.raises(ValidationError, match="the band of type noul has no certificate"):
        make_policy(types={"noul": Band(automate_at_or_above=0.9, support=20)})
    policy = make_policy()
    assert policy.schema_ == "decision-policy/2"
    assert policy.types["noul"].certificate == CERTIFICATE
    looser = make_policy(
        types={
            "noul": band(0.9, 0.6).model_copy(update={"certificate": CERTIFICATE.model_copy(update={"max_error": 0.1})})
        }
    )
    assert looser.version != policy.version  # the certificate is part of what the version seals


def test_a_policy_sealed_before_certificates_is_still_served_with_its_version() -> None:
    """A decision-policy/1 block as the previous decisionctl wrote it (no certificate, reason confidence_band)."""
    block = {
        "schema": "decision-policy/1",
        "model_sha256": MODEL,
        "calibration_sha256": calibration_sha256(None),
        "types": {"noul": {"automate_at_or_above": 0.9, "review_at_or_above": 0.6, "support": 20}},
        "questions": {},
        "min_label_mass": None,
        "out_of_scope_at_or_above": None,
        "provenance": PROVENANCE.model_dump(mode="json"),
        "version": "f722f335ef132371",  # computed by the decisionctl that wrote decision-policy/1
    }
    old = Policy.model_validate(block)  # the version the old code computed still verifies
    assert old.schema_ == "decision-policy/1" and old.types["noul"].certificate is None
    assert verdict(old, "noul", [0.95, 0.05]).action == "automate"


def test_the_policy_survives_the_manifest_round_trip(tmp_path: Path) -> None:
    calibration = Calibration(temperature={"choice": 1.3})
    policy = make_policy(calibration_sha256=calibration_sha256(calibration), min_label_mass=0.2)
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1, calibration=calibration, policy=policy)
    path = tmp_path / "manifest.json"
    write_manifest(manifest, path)
    again = read_manifest(path)
    assert again == manifest and again.policy is not None
    assert again.policy.version == policy.version
    again.policy.check_binding(model_sha256=MODEL, calibration_sha256=again.calibration_sha256())


def test_a_policy_from_another_model_or_calibration_is_refused() -> None:
    policy = make_policy()
    with pytest.raises(PolicyError, match=f"sha256 {MODEL}, but the model served has sha256 {OTHER_MODEL}"):
        policy.check_binding(model_sha256=OTHER_MODEL, calibration_sha256=calibration_sha256(None))
    refitted = calibration_sha256(Calibration(temperature={"noul": 0.8}))
    assert refitted != calibration_sha256(None)
    with pytest.raises(PolicyError, match="calibration changed after the policy was written"):
        policy.check_binding(model_sha256=MODEL, calibration_sha256=refitted)
    policy.check_binding(model_sha256=MODEL, calibration_sha256=calibration_sha256(None))


def test_a_policy_measured_under_another_debias_mode_is_refused() -> None:
    policy = make_policy(order_debias_mode="reverse")
    policy.check_debias("reverse")
    for served in ("off", "rotations", None):
        with pytest.raises(PolicyError, match=r"order-debiasing 'reverse'.*DECISION_ORDER_DEBIAS=reverse"):
            policy.check_debias(served)
    assert policy.version != make_policy().version  # the mode is part of what the version seals
    unrecorded = make_policy()  # as sealed before the mode was recorded: not checked
    unrecorded.check_debias("rotations")
    old_format = unrecorded.model_dump(by_alias=True, mode="json", exclude={"order_debias_mode"})
    assert Policy.model_validate(old_format).version == unrecorded.version  # its version still verifies


def test_a_policy_measured_under_other_option_labels_is_refused() -> None:
    policy = make_policy(option_labels="names")
    policy.check_option_labels("names")
    for served in ("letters", None):
        with pytest.raises(PolicyError, match=r"option labels 'names'.*DECISION_OPTION_LABELS=names"):
            policy.check_option_labels(served)
    assert policy.version != make_policy().version  # the labels are part of what the version seals
    unrecorded = make_policy()  # as sealed before the labels were recorded: not checked, its version unchanged
    unrecorded.check_option_labels("names")
    old_format = unrecorded.model_dump(by_alias=True, mode="json", exclude={"option_labels"})
    assert Policy.model_validate(old_format).version == unrecorded.version


def test_the_calibration_hash_covers_the_whole_block() -> None:
    base = Calibration(temperature={"choice": 1.3})
    assert calibration_sha256(base) == calibration_sha256(Calibration(temperature={"choice": 1.3}))
    assert calibration_sha256(base) != calibration_sha256(Calibration(temperature={"choice": 1.31}))
    assert calibration_sha256(base) != calibration_sha256(Calibration(temperature={"choice": 1.3}, fitted_on={"n": 1}))


@pytest.mark.parametrize(
    ("qtype", "probs", "expected"),
    [
        ("noul", [0.9, 0.1], "automate"),  # exactly at the threshold
        ("noul", [0.05, 0.95], "automate"),  # a confident no counts as much as a confident yes
        ("noul", [0.7, 0.3], "review"),
        ("noul", [0.6, 0.4], "review"),
        ("noul", [0.45, 0.55], "abstain"),
        ("choice", [0.97, 0.02, 0.01], "review"),  # choice automates nothing
        ("choice", [0.34, 0.33, 0.33], "abstain"),
    ],
)
def test_the_band_decides_on_the_probability_of_the_picked_option(
    qtype: str, probs: list[float], expected: str
) -> None:
    got = verdict(make_policy(), qtype, probs)
    assert (got.action, got.reason) == (expected, "type_band")


def test_a_type_the_policy_did_not_measure_is_not_automated() -> None:
    got = verdict(make_policy(), "score", [0.98, 0.01, 0.01])
    assert (got.action, got.reason) == ("abstain", "not_measured")


def test_one_question_can_have_its_own_band_and_the_reason_names_it() -> None:
    own = QuestionBand(type="choice", automate_at_or_above=0.8, support=30, certificate=CERTIFICATE)
    policy = make_policy(questions={QUESTION: own})
    got = verdict(policy, "choice", [0.85, 0.1, 0.05], options_sha256=QUESTION)
    assert (got.action, got.reason) == ("automate", "question_band")
    got = verdict(policy, "choice", [0.85, 0.1, 0.05], options_sha256="f" * 16)  # a question the cases never asked
    assert (got.action, got.reason) == ("review", "type_band")
    # a band recorded for another type never applies
    assert verdict(policy, "noul", [0.85, 0.15], options_sha256=QUESTION).reason == "type_band"
    assert policy.band_name("choice", QUESTION) == QUESTION
    assert policy.band_name("choice", "f" * 16) == "choice"
    assert policy.band_name("score", QUESTION) is None


def test_low_label_mass_abstains_and_the_environment_overrides_the_manifest() -> None:
    policy = make_policy(min_label_mass=0.3)
    assert verdict(policy, "noul", [0.95, 0.05], label_mass=0.2).reason == "low_label_mass"
    assert verdict(policy, "noul", [0.95, 0.05], label_mass=0.3).action == "automate"
    assert verdict(policy, "noul", [0.95, 0.05], label_mass=0.2, min_label_mass=0.1).action == "automate"
    assert verdict(make_policy(), "noul", [0.95, 0.05], label_mass=0.01).action == "automate"  # no minimum set
    assert verdict(make_policy(), "noul", [0.95, 0.05], label_mass=0.2, min_label_mass=0.5).action == "abstain"


def test_out_of_scope_abstains_when_none_of_these_is_the_top_option() -> None:
    policy = make_policy()
    # the declared options share 1 - 0.4 = 0.6: the top one has 0.6 * 0.9 = 0.54 > 0.4
    assert verdict(policy, "noul", [0.9, 0.1], out_of_scope=0.4).action == "automate"
    # 0.6 against 0.4 * 0.9 = 0.36: the model would rather say none of these
    got = verdict(policy, "noul", [0.9, 0.1], out_of_scope=0.6, label_mass=0.01, min_label_mass=0.5)
    assert (got.action, got.reason) == ("abstain", "out_of_scope")
    strict = make_policy(out_of_scope_at_or_above=0.2)
    assert verdict(strict, "noul", [0.9, 0.1], out_of_scope=0.2).reason == "out_of_scope"
    assert verdict(strict, "noul", [0.9, 0.1], out_of_scope=0.19).reason == "type_band"


def test_the_served_value_is_the_confidence_evaluate_measures_thresholds_on() -> None:
    """The policy's confidence and evaluate's must be one number, or the served thresholds mean something else."""
    from decision_spec.policy import confidence_of

    rng = random.Random(7)
    noul = parse_case(1, {"id": "n", "state": "s", "question": {"type": "noul"}, "expected": True})
    choice = parse_case(
        2, {"id": "c", "state": "s", "question": {"type": "choice", "criteria": dict.fromkeys("abcd")}, "expected": "a"}
    )
    score = parse_case(
        3, {"id": "s", "state": "s", "question": {"type": "score", "criteria": ["0", "1", "2"]}, "expected": 1}
    )
    for _ in range(200):
        p = rng.random()
        answer = {"type": "noul", "noul": p}
        pred = prediction_from_response(noul, reply(answer), 0.0)
        assert confidence_of("noul", [p, 1 - p]) == pytest.approx(pred.confidence, abs=1e-15)
        raw = [rng.random() for _ in range(4)]
        probs = [x / sum(raw) for x in raw]
        table = dict(zip("abcd", probs, strict=True))
        best = max(table, key=lambda k: table[k])
        pred = prediction_from_response(
            choice, reply({"type": "choice", "choice": best, "probabilities": table, "confidence": 0}), 0.0
        )
        assert confidence_of("choice", probs) == pred.confidence
        levels = {str(i): q for i, q in enumerate(probs[:3])}
        answer = {"type": "score", "score": 0, "legend": {}, "probabilities": levels, "confidence": 0}
        pred = prediction_from_response(score, reply(answer), 0.0)
        assert confidence_of("score", probs[:3]) == pred.confidence
