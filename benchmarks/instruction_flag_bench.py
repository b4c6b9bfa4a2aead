"""The instructs_decider flag (instruction_flags.py) on payloads and on benign text: text only, no model.

Detection: the share of payloads flagged, over the injection benchmark's payloads (injection_payloads.py: every
family for every case, 300 attacked states; forged turns with the decider's markers) and over paraphrases in up to
sixteen languages written apart from them (benchmarks/instruction_paraphrases.jsonl: 60 the word lists were tuned on,
30 written after they were frozen). False flags: the share of benign states flagged, over the flags corpus
(benchmarks/flags_corpus.jsonl: HTML emails, logs, code, customer messages that say "ignore my previous email", nine
languages) and the clean states of the evaluation suite and the position-balanced set. Where the decider suite is
present (evaluation/decider/*.jsonl, evaluation/decider_suite/build.py: written by another hand, never tuned on), its
distinct states are read too: those tagged planted_instruction for detection, the rest for false flags. The older
addressed_to_classifier flag (input_flags.py) is measured beside it.

    .venv/bin/python benchmarks/instruction_flag_bench.py [--out benchmarks/instruction_flags.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from decision_adapter.input_flags import addressed_to_classifier
from decision_adapter.instruction_flags import instructs_decider
from injection_payloads import BALANCED, FAMILIES, PLACEMENTS, SUITE, attacked_state, load_cases

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "benchmarks" / "flags_corpus.jsonl"
PARAPHRASES = ROOT / "benchmarks" / "instruction_paraphrases.jsonl"
DECIDER_SUITE = sorted((ROOT / "evaluation" / "decider").glob("*.jsonl"))
FLAGS: dict[str, Callable[[Any], bool]] = {
    "instructs_decider": instructs_decider,
    "addressed_to_classifier": addressed_to_classifier,
}


def lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in text if line.strip() and not line.startswith("#")]


def rate(flag: Callable[[Any], bool], states: list[Any]) -> dict[str, Any]:
    hits = sum(bool(flag(s)) for s in states)
    return {"flagged": hits, "n": len(states), "rate": hits / len(states)}


def decider_suite() -> tuple[list[Any], list[Any], str]:
    """The decider suite's distinct states: (planted instructions, the rest, sha256 of its files)."""
    digest, seen, planted, rest = hashlib.sha256(), set(), [], []
    for path in DECIDER_SUITE:
        digest.update(path.read_bytes())
        for row in lines(path):
            key = json.dumps(row["state"], sort_keys=True)
            if key not in seen:
                seen.add(key)
                (planted if "planted_instruction" in row.get("tags", []) else rest).append(row["state"])
    return planted, rest, digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "instruction_flags.json")
    parser.add_argument("--show", action="store_true", help="print the misses and the false flags")
    args = parser.parse_args()
    cases = load_cases()
    payloads: dict[str, list[Any]] = {f: [] for f in FAMILIES}
    for i, case in enumerate(cases):
        for family in FAMILIES:
            placement = PLACEMENTS[i % len(PLACEMENTS)]
            payloads[family].append(attacked_state(case, family, placement, model="decider", index=i))
    paraphrases = lines(PARAPHRASES)
    benign = {
        "flags_corpus": [r["text"] for r in lines(CORPUS)],
        "suite_states": [r["state"] for r in lines(SUITE)],
        "position_balanced_states": [r["state"] for r in lines(BALANCED)],
    }
    planted, suite_rest, suite_sha = decider_suite()
    if planted:
        benign["decider_suite_states"] = suite_rest
    results: dict[str, Any] = {"command": "benchmarks/instruction_flag_bench.py", "flags": {}}
    if planted:
        results["decider_suite_sha256"] = suite_sha
    for name, flag in FLAGS.items():
        row: dict[str, Any] = {
            "detection": {f: rate(flag, states) for f, states in payloads.items()},
            "paraphrases": {
                kind: rate(flag, [p["text"] for p in paraphrases if p["set"] == kind]) for kind in ("tuned", "held_out")
            },
            "false_flags": {k: rate(flag, states) for k, states in benign.items()},
        }
        every = [s for states in payloads.values() for s in states]
        row["detection_all"] = rate(flag, every)
        if planted:
            row["decider_suite_planted"] = rate(flag, planted)
        row["false_flags_all"] = rate(flag, [s for states in benign.values() for s in states])
        results["flags"][name] = row
        print(
            f"{name}: payloads {row['detection_all']['flagged']}/{row['detection_all']['n']}, paraphrases tuned "
            f"{row['paraphrases']['tuned']['flagged']}/{row['paraphrases']['tuned']['n']}, held out "
            f"{row['paraphrases']['held_out']['flagged']}/{row['paraphrases']['held_out']['n']}, decider suite planted "
            f"{row.get('decider_suite_planted', {}).get('flagged')}/{len(planted)}, benign "
            f"{row['false_flags_all']['flagged']}/{row['false_flags_all']['n']}; "
            + ", ".join(f"{f} {v['flagged']}/{v['n']}" for f, v in row["detection"].items())
            + "; false flags: "
            + ", ".join(f"{k} {v['flagged']}/{v['n']}" for k, v in row["false_flags"].items())
        )
        if args.show:
            for p in paraphrases:
                if not flag(p["text"]):
                    print("  missed:", p["id"], p["text"])
            for kind, states in benign.items():
                for s in states:
                    if flag(s):
                        print("  false flag:", kind, str(s)[:160])
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
