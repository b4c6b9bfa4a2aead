"""The decider suite (evaluation/decider/, issue 44): every case reads as decisionctl evaluate reads it, the certify
part holds at least 150 cases of each question type over at least five task families, the split is the hash rule's
and keeps a state's questions together, the labels keep the rules the datasheet states, and the committed files are
exactly what the generator writes. No model loads."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from decisionctl.core.cases import load_cases

from evaluation.decider_suite import build
from evaluation.decider_suite.compose import PARTS, part_of

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "evaluation" / "decider"


def rows(part: str) -> list[dict[str, Any]]:
    lines = (SUITE / f"{part}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("#")]


ALL = {part: rows(part) for part in PARTS}
CASES = [c for part in PARTS for c in ALL[part]]


@pytest.mark.parametrize("part", PARTS)
def test_every_part_reads_as_evaluate_reads_it(part: str) -> None:
    cases = load_cases(SUITE / f"{part}.jsonl")
    assert len(cases) == len(ALL[part])


def test_sizes_types_and_families() -> None:
    assert len(CASES) >= 1000
    assert len({c["id"] for c in CASES}) == len(CASES)
    certify = Counter(c["question"]["type"] for c in ALL["certify"])
    assert set(certify) == {"noul", "choice", "score"} and min(certify.values()) >= 150
    families = {c["family"] for c in CASES}
    assert {"ticket_routing", "agent_approval", "urgency", "moderation", "tool_selection"} <= families
    tools = next(c for c in CASES if c["family"] == "tool_selection")["question"]["criteria"]
    assert len(tools) >= 12
    moderation = next(c for c in CASES if c["family"] == "moderation")["question"]["criteria"]
    assert "Not for moderation" in moderation  # the path out of scope
    for part in ("certify", "test"):
        tags = Counter(t for c in ALL[part] for t in c["tags"])
        assert tags["planted_instruction"] >= 20 and tags["ambiguous"] >= 10, part
    assert {c["difficulty"] for c in CASES} == {"easy", "medium", "hard"}


def test_the_split_is_the_hash_rule_and_keeps_a_state_together() -> None:
    where: dict[str, set[str]] = defaultdict(set)
    for part, cases in ALL.items():
        for c in cases:
            assert c["split"] == part == part_of(c["id"])
            where[c["id"].split("/")[0]].add(part)
    assert all(len(parts) == 1 for parts in where.values())
    assert part_of("t001/route") == part_of("t001/urgency")
    assert {part_of(f"x{n}/q") for n in range(200)} == set(PARTS)


def test_the_committed_files_are_what_the_generator_writes() -> None:
    written = build.files(build.suite())
    assert written == build.files(build.suite())  # seeded: the same bytes every time
    for part, text in written.items():
        assert (SUITE / f"{part}.jsonl").read_text(encoding="utf-8") == text, part


def test_a_changed_case_is_seen() -> None:
    written = build.files(build.suite())
    changed = written["test"].replace('"expected": true', '"expected": false', 1)
    assert changed != written["test"]


def by_state() -> dict[str, dict[str, dict[str, Any]]]:
    states: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for c in CASES:
        gid, qid = c["id"].split("/")
        states[gid][qid] = c
    return states


def test_labels_keep_the_datasheet_rules() -> None:
    for gid, qs in by_state().items():
        if gid.startswith("a"):  # approval needed exactly when someone must review; nothing to review: no damage
            assert qs["approve"]["expected"] == (qs["reviewer"]["expected"] != "No one"), gid
            assert (qs["reviewer"]["expected"] == "No one") == (qs["damage"]["expected"] == 0), gid
        if gid.startswith("t"):  # the triage path exactly for tickets that say too little
            assert (qs["route"]["expected"] == "Triage") == ("ambiguous" in qs["route"]["tags"]), gid
        if gid.startswith("r"):
            unclear = qs["tool"]["expected"] == "ask_clarifying_question"
            assert unclear == (qs["clarity"]["expected"] == 0) == ("ambiguous" in qs["tool"]["tags"]), gid
        if gid.startswith("m"):
            out_of_scope = qs["what"]["expected"] in ("Allowed", "Not for moderation")
            assert out_of_scope == (qs["severity"]["expected"] == 0), gid
