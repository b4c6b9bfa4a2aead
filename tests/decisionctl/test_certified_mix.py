"""The mix a policy records from its certification (issue 22): each action's share of the certifying cases and each
question's option mix, as the stack's decision_shift section reads it verbatim (hand-made predictions, as in
test_decisionctl_policy.py)."""

from __future__ import annotations

import json
from datetime import date

from decision_spec.loop_config import DecisionShift
from decision_spec.manifest import Manifest
from decision_spec.policy import ACTIONS, content_version, verdict
from decisionctl.certification.policies import from_results

from tests.policy_support import MODEL, keys_of, predictions, results_for, served


def test_the_policy_records_the_action_shares_its_bands_give_the_cases_and_each_questions_option_mix() -> None:
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    preds = predictions()
    keys = keys_of(preds)
    results = results_for(preds, served(manifest, source="identity", temperature={"noul": 1.0}))
    policy = from_results(results, manifest, created=date(2026, 12, 1), keys=keys)
    mix = policy.certified_mix
    assert mix is not None and mix.cases == len(preds)
    # the served rule, each case under its question's band, takes the same shares the certification counted
    taken = dict.fromkeys(ACTIONS, 0)
    for p in preds:
        taken[verdict(policy, p.type, p.probs, options_sha256=keys[p.id]).action] += 1
    assert mix.actions == {a: n / len(preds) for a, n in taken.items()}
    assert len(set(taken.values())) > 1  # not one action for every case
    for key in set(keys.values()):
        members = [p for p in preds if keys[p.id] == key]
        option_mix = mix.questions[key]
        assert (option_mix.type, option_mix.cases, option_mix.options) == (
            members[0].type,
            len(members),
            members[0].options,
        )
        expected = [sum(p.predicted_index == i for p in members) / len(members) for i in range(len(members[0].options))]
        assert option_mix.shares == expected
    # the stack's decision_shift.certified is this block, copied from the manifest's JSON as it is (one model)
    section = {"enabled": True, "policy_version": policy.version, "certified": json.loads(mix.model_dump_json())}
    shift = DecisionShift.model_validate({**section, "action_band_points": 10.0, "option_band_points": 10.0})
    assert shift.certified == mix


def test_a_policy_without_a_mix_keeps_the_version_it_had_before_mixes_were_recorded() -> None:
    manifest = Manifest(model_file="m.gguf", sha256=MODEL, size_bytes=1)
    preds = predictions()
    results = results_for(preds, served(manifest, source="identity", temperature={"noul": 1.0}))
    with_mix = from_results(results, manifest, created=date(2026, 12, 1), keys=keys_of(preds))
    block = with_mix.model_dump(by_alias=True, mode="json")
    del block["certified_mix"]
    assert content_version(block) != with_mix.version  # the mix is sealed into the version
    block["certified_mix"] = None
    without = {k: v for k, v in block.items() if k != "certified_mix"}
    assert content_version(block) == content_version(without)  # a policy sealed before the field: same hash
