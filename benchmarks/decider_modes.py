"""Each order-debias mode on the decider (issue 44): accuracy, the lean to the first option shown, and the time a
decision takes, on the same cases of the decider suite's fit part, from `decisionctl evaluate` runs.

The runs are `<runs>/fit60-<mode>/` for `off`, `rotations` and `adaptive` (the decider as packaged, no calibration,
no policy, `DECISION_ORDER_DEBIAS=<mode>`; the cases are the first 20 of each type in evaluation/decider/fit.jsonl),
and `reverse` is read from `<runs>/fit-served/` (the same settings, the whole fit part) for the same case ids.
Calls no endpoint:

    .venv/bin/python benchmarks/decider_modes.py --runs .cache/decider-runs

First slot: among choice answers, the share that picked the option listed first, beside the share of those cases
whose label is listed first (a mode that removes the lean to the first slot brings the two together).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from decisionctl.core.labeled import Prediction

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decider_stats import wilson  # a sibling script, not a package

MODES = ("off", "reverse", "rotations", "adaptive")


def read(path: Path) -> dict[str, Prediction]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {p.id: p for p in map(Prediction.from_json, rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path(".cache/decider-runs"))
    args = parser.parse_args()
    runs = {mode: read(args.runs / f"fit60-{mode}" / "predictions.jsonl") for mode in MODES if mode != "reverse"}
    ids = set(runs["off"])
    if any(set(r) != ids for r in runs.values()):
        print("the runs did not score the same cases", file=sys.stderr)
        return 1
    whole_fit = read(args.runs / "fit-served" / "predictions.jsonl")
    runs["reverse"] = {i: whole_fit[i] for i in ids}
    print(f"{len(ids)} cases of the fit part ({', '.join(sorted({p.type for p in runs['off'].values()}))}):\n")
    print("| mode | accuracy (95 % CI) | yes/no | choice | score | choice: picked the first option | s a decision |")
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        preds = [runs[mode][i] for i in sorted(ids)]
        right = sum(p.correct for p in preds)
        low, high = wilson(right, len(preds))
        by_type = {
            t: sum(p.correct for p in preds if p.type == t) / sum(1 for p in preds if p.type == t)
            for t in ("noul", "choice", "score")
        }
        choices = [p for p in preds if p.type == "choice"]
        first = sum(p.predicted_index == 0 for p in choices) / len(choices)
        labelled_first = sum(p.expected_index == 0 for p in choices) / len(choices)
        seconds = statistics.mean(p.latency_s for p in preds)
        print(
            f"| {mode} | {right / len(preds):.1%} ({low:.0%}-{high:.0%}) | {by_type['noul']:.0%} | "
            f"{by_type['choice']:.0%} | {by_type['score']:.0%} | {first:.0%} (labels first: {labelled_first:.0%}) | "
            f"{seconds:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
