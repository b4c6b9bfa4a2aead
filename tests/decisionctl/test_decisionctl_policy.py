"""From evaluate's certification to a policy block: per-question and per-type bands with their certificates,
binding, provenance, and that the served rule takes the same cases to each action as the certification
counted (hand-made predictions; the endpoint round trip is in test_adapter_policy.py)."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import date
from pathlib import Path

import pytest
from decision_spec.contract import DEFAULT_REVIEW_INPUT_FLAGS, INPUT_FLAGS
from decision_spec.manifest import Calibration, Manifest, read_manifest, write_manifest
from decision_spec.policy import Verdict, seal, verdict
from decisionctl import tables
from decisionctl.certification.policies import action_table, from_results
from decisionctl.commands import cli
from decisionctl.commands.options import input_flags_arg, shipped
from decisionctl.core import bands
from decisionctl.core.cases import case_digest, load_cases
from decisionctl.core.labeled import IDENTITY, PREDICTIONS, Prediction
from decisionctl.core.scoring import PredictionLog
from decisionctl.core.served_calibration import PolicyRefused, check_run_served
from decisionctl.release.packaging import package_model

from tests.decisionctl_support import reply, x_run
from tests.policy_support import MODEL, keys_of, predictions, results_for, served


def test_the_policy_carries_the_certified_bands_bound_to_the_manifest() -> None:
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    preds = predictions()
    results = results_for(preds, served(manifest, source="identity", temperature={"noul": 1.0}))
    policy = from_results(results, manifest, created=date(2026, 12, 1))
    cert = results["certification"]
    assert set(policy.types) == {"noul", "choice"} and set(policy.questions) == {"1" * 16, "2" * 16, "3" * 16}
    assert policy.schema_ == "decision-policy/2"
    for name, band, entry in [
        *((t, policy.types[t], cert["types"][t]) for t in policy.types),
        *((k, policy.questions[k], cert["questions"][k]) for k in policy.questions),
    ]:
        assert band.automate_at_or_above == entry["automate_at_or_above"], name
        assert band.review_at_or_above == entry["review_at_or_above"], name
        c = band.certificate
        assert c is not None and (c.max_error, c.confidence, c.method) == (0.05, 0.95, "fallback-clopper-pearson/1")
        assert (c.cases, c.labels_sha256) == (entry["cases"], entry["labels_sha256"])
        auto = entry["automate"] or {"cases": 0, "errors": 0, "bound": None}
        assert (c.automated, c.errors, c.bound) == (auto["cases"], auto["errors"], auto["bound"])
    noul = policy.types["noul"]
    assert noul.automate_at_or_above is not None and noul.certificate is not None
    assert noul.certificate.bound is not None and noul.certificate.bound <= 0.05  # certified: bound within E
    assert policy.types["choice"].automate_at_or_above is None  # 60 cases cannot certify 5 %
    assert policy.questions["2" * 16].type == "noul" and policy.questions["1" * 16].type == "choice"
    assert (noul.support, policy.types["choice"].support) == (800, 60)
    assert (policy.model_sha256, policy.calibration_sha256) == (MODEL, manifest.calibration_sha256())
    assert policy.order_debias_mode == "reverse"  # the mode the run served, from its identity
    prov = policy.provenance
    assert (prov.cases_file, prov.cases_sha256, prov.created) == ("my-cases.jsonl", "c" * 64, "2026-12-01")
    assert (prov.target_accuracy, prov.min_support, prov.review_accuracy) == (0.95, 5, 0.5)
    again = from_results(results, manifest, created=date(2027, 3, 1))
    assert again.version == policy.version  # same thresholds, same cases: same version


def test_the_policy_records_the_state_boundary_and_keeps_the_input_flags_it_reviews() -> None:
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    results = results_for(predictions(), {**served(manifest, source="identity"), "state_boundary": "tagged"})
    plain = from_results(results, manifest, created=date(2026, 12, 1))  # a new policy: the default
    assert (plain.state_boundary, plain.review_input_flags) == ("tagged", list(DEFAULT_REVIEW_INPUT_FLAGS))
    flagged = from_results(results, manifest, created=date(2026, 12, 1), review_input_flags=["control_strings"])
    assert flagged.review_input_flags == ["control_strings"] and flagged.version != plain.version
    manifest = manifest.model_copy(update={"policy": flagged})
    assert from_results(results, manifest, created=date(2027, 1, 1)).review_input_flags == ["control_strings"]
    cleared = from_results(results, manifest, created=date(2027, 1, 1), review_input_flags=[])
    assert cleared.review_input_flags == []
    opted_out = manifest.model_copy(update={"policy": cleared})  # `none` is kept: an opt-out, not an omission
    assert from_results(results, opted_out, created=date(2027, 2, 1)).review_input_flags == []
    unrecorded = seal(  # a policy written before the default recorded no list: re-written, it gets the default
        model_sha256=MODEL, calibration_sha256=manifest.calibration_sha256(), types=plain.types,
        provenance=plain.provenance,
    )  # fmt: skip
    assert unrecorded.review_input_flags is None
    older = manifest.model_copy(update={"policy": unrecorded})
    assert from_results(results, older, created=date(2027, 2, 1)).review_input_flags == list(DEFAULT_REVIEW_INPUT_FLAGS)
    legacy = results_for(predictions(), served(manifest, source="identity"))  # a run before the boundary existed
    assert from_results(legacy, Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1),
                        created=date(2026, 12, 1)).state_boundary is None  # fmt: skip
    named = results_for(predictions(), {**served(manifest, source="identity"), "option_labels": "names"})
    bare = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    assert from_results(named, bare, created=date(2026, 12, 1)).option_labels == "names"  # and the adapter checks it


def test_a_policy_written_with_the_defaults_reviews_a_flagged_answer_it_would_otherwise_automate() -> None:
    """Issue 48: no prompt boundary kept the decider from obeying words in the state, so a policy evaluate writes
    with no --review-input-flags sends an answer raising instructs_decider to review, not automate, at a confidence
    its band automates; `--review-input-flags none` (an empty list) is the explicit opt-out."""
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    results = results_for(predictions(), served(manifest, source="identity"))
    policy = from_results(results, manifest, created=date(2026, 12, 1))
    assert policy.review_input_flags == list(INPUT_FLAGS)  # every flag
    threshold = policy.types["noul"].automate_at_or_above
    assert threshold is not None
    sure = [threshold, 1.0 - threshold]  # at the automate threshold of noul's band
    assert verdict(policy, "noul", sure) == Verdict("automate", "type_band")
    for flag in INPUT_FLAGS:
        assert verdict(policy, "noul", sure, input_flags=[flag]) == Verdict("review", "input_flagged"), flag
    opted_out = from_results(results, manifest, created=date(2026, 12, 1), review_input_flags=input_flags_arg("none"))
    assert verdict(opted_out, "noul", sure, input_flags=["instructs_decider"]) == Verdict("automate", "type_band")


def test_the_served_rule_takes_the_cases_the_certification_counted() -> None:
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    preds = predictions()
    results = results_for(preds, served(manifest, source="identity"))
    policy = from_results(results, manifest, created=date(2026, 12, 1))
    keys = keys_of(preds)
    table = action_table(preds, policy, keys)
    questions = results["certification"]["questions"]
    for qtype, actions in table.items():
        entries = [q for q in questions.values() if q["type"] == qtype]
        assert sum(a["share"] for a in actions.values()) == pytest.approx(1.0)
        for action in ("automate", "review", "abstain"):
            assert actions[action]["cases"] == sum((q[action] or {"cases": 0})["cases"] for q in entries), action
    # the per-type bands alone (no keys: every case served as a question the cases never asked)
    by_type = action_table(preds, policy)
    for qtype, actions in by_type.items():
        entry = results["certification"]["types"][qtype]
        assert actions["automate"]["cases"] == (entry["automate"] or {"cases": 0})["cases"]
    assert by_type["noul"]["automate"]["accuracy"] == 1.0


def test_a_run_scored_under_another_model_or_calibration_is_refused() -> None:
    calibrated = Manifest(
        model_file="m.gguf", sha256=MODEL, size_bytes=1, calibration=Calibration(temperature={"choice": 1.3})
    )
    with pytest.raises(PolicyRefused, match="scored on model sha256"):
        check_run_served({"model_sha256": "d" * 64, "calibration": {"source": "manifest"}}, calibrated)
    with pytest.raises(PolicyRefused, match="not the manifest's"):
        check_run_served(served(calibrated, source="identity", temperature={"choice": 1.0}), calibrated)
    with pytest.raises(PolicyRefused, match="not the manifest's"):
        check_run_served(served(calibrated, source="manifest", temperature={"choice": 1.2}), calibrated)
    check_run_served(served(calibrated, source="manifest", temperature={"choice": 1.3, "noul": 1.0}), calibrated)
    with pytest.raises(PolicyRefused, match="not the manifest's"):
        bare = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
        check_run_served(served(bare, source="manifest", temperature={"choice": 1.3}), bare)


def test_repackaging_the_same_model_keeps_its_policy(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    out = tmp_path / "out"
    first = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=out)
    results = results_for(predictions(), served(first.manifest, source="identity"))
    policy = from_results(results, first.manifest, created=date(2026, 12, 1))
    write_manifest(first.manifest.model_copy(update={"policy": policy}), out / "manifest.json")
    again = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=out)
    assert again.manifest.policy == policy
    assert "manifest.json unchanged" in again.actions


def prescored(out: Path, cases_path: Path, model_sha256: str, seed: int = 5) -> None:
    """An --out directory whose every case is already scored, so evaluate sends nothing (no endpoint runs)."""
    rng = random.Random(seed)
    out.mkdir(parents=True)
    log = PredictionLog(out / PREDICTIONS)
    for case in load_cases(cases_path):
        n = len(case.options)
        sure = rng.random() < 0.6
        probs = [0.02 / (n - 1)] * n if sure else [1 / n] * n
        right = case.expected_index if rng.random() < (0.97 if sure else 0.4) else (case.expected_index + 1) % n
        if sure:
            probs[right] = 0.98
        p = Prediction(
            case.id,
            case.type,
            list(case.options),
            probs,
            case.expected_index,
            right,
            probs[right],
            None,
            1.0,
            model_sha256,
            0.1,
        )
        log.append({**p.to_json(), "case_sha256": case_digest(case)})
    (out / IDENTITY).write_text(json.dumps(x_run(model_sha256=model_sha256)), encoding="utf-8")


def test_evaluate_writes_the_policy_into_the_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases_path = Path(shipped("examples.jsonl"))
    manifest_path = tmp_path / "manifest.json"
    write_manifest(Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1), manifest_path)
    out = tmp_path / "run"
    prescored(out, cases_path, MODEL)
    argv = ["evaluate", str(cases_path), "--url", "http://127.0.0.1:9", "--out", str(out)]
    assert cli.main([*argv, "--write-policy", str(manifest_path)]) == 0
    printed = capsys.readouterr()
    policy = read_manifest(manifest_path).policy
    assert policy is not None and f"wrote policy {policy.version}" in printed.err
    assert policy.review_input_flags == list(DEFAULT_REVIEW_INPUT_FLAGS)  # no --review-input-flags: the default
    assert policy.provenance.cases_sha256 == hashlib.sha256(cases_path.read_bytes()).hexdigest()
    assert set(policy.types) == {"noul", "choice", "score"}
    keys = bands.question_keys(load_cases(cases_path))
    assert set(policy.questions) == set(keys.values()) and len(policy.questions) == 13
    assert f"policy {policy.version}: share of cases per action" in printed.out
    results = json.loads((out / "results.json").read_text())
    assert results["policy"]["version"] == policy.version
    assert "Certified for automation at error <= 5.0% with probability 95.0% out of sample" in printed.out
    # 51 cases cannot certify 5 %: no band automates, and each says what it would take
    assert all(b.automate_at_or_above is None for b in [*policy.types.values(), *policy.questions.values()])
    assert printed.out.count("no automate band") == 16
    assert "even error-free, a band needs 117 automated cases" in printed.out
    figures = sorted(p.name for p in (out / "automation").iterdir())
    assert len(figures) == 16 and "type-noul.png" in figures
    # the same run again: the manifest already holds this version and is left as it is
    before = manifest_path.read_bytes()
    assert cli.main([*argv, "--write-policy", str(manifest_path)]) == 0
    assert manifest_path.read_bytes() == before and "already holds policy" in capsys.readouterr().err
    # the explicit opt-out: a new version that reviews no flag
    assert cli.main([*argv, "--write-policy", str(manifest_path), "--review-input-flags", "none"]) == 0
    opted_out = read_manifest(manifest_path).policy
    assert opted_out is not None and opted_out.review_input_flags == [] and opted_out.version != policy.version


def test_evaluate_refuses_a_policy_for_a_manifest_of_another_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases_path = Path(shipped("examples.jsonl"))
    manifest_path = tmp_path / "manifest.json"
    write_manifest(Manifest(model_file="m.gguf", sha256="f" * 64, size_bytes=1), manifest_path)
    before = manifest_path.read_bytes()
    out = tmp_path / "run"
    prescored(out, cases_path, MODEL)
    argv = ["evaluate", str(cases_path), "--url", "http://127.0.0.1:9", "--out", str(out)]
    assert cli.main([*argv, "--write-policy", str(manifest_path)]) == 1
    assert "was not changed: the cases were scored on model sha256" in capsys.readouterr().err
    assert manifest_path.read_bytes() == before
    assert cli.main([*argv, "--write-policy", str(manifest_path), "--fit-calibration"]) == 1
    assert "fit first, restart the adapter" in capsys.readouterr().err


def test_decide_shows_the_action_where_the_server_gives_one() -> None:
    served = reply({"type": "noul", "noul": 0.93, "x_action": "automate", "x_action_reason": "question_band"})
    table = tables.answers(served)
    assert table.splitlines()[0].split()[-1] == "action" and "automate (question_band)" in table
    older = reply({"type": "noul", "noul": 0.93, "x_action": "automate", "x_action_reason": "confidence_band"})
    assert "automate (confidence_band)" in tables.answers(older)  # an adapter before per-question bands
    assert "action" not in tables.answers(reply({"type": "noul", "noul": 0.93}))
