"""Order-debiasing modes side by side on the bundled model, in one run: which slots each picks, how many orders it
reads, and what a question costs.

Seven modes, one adapter process each (the first also fits the slot prior):
off, reverse, rotations, adaptive (DECISION_ORDER_DEBIAS), and off + prior, reverse + prior, adaptive + prior:
the same modes with a slot prior that `decisionctl fit-prior` fits first, on the unlabeled requests of
tools/decisionctl/data/prior_requests.jsonl (not the set measured here), into a copy of the model directory.

On the position-balanced labeled set (tools/decisionctl/data/position_balanced.jsonl, every slot right
equally often), per mode: accuracy; the share of answers that picked the first, a middle or the last slot
against the share of cases where that slot was right; the mean orders read (x_orders); the cost of a
question: the adapter's own `x_timing_ms.questions` (the question's reads after the state, so the same as on
a resident state), median per option count. Adaptive modes also: how often they pick what rotations picks,
and the largest probability difference from it.

    flock /tmp/cpu.lock .venv/bin/python benchmarks/position_bias.py [--limit 8] [--out benchmarks/position_bias.json]

About 10 minutes on 2 cores; run it alone (one model-running process at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from decision_adapter.identity import cpu_model
from decision_adapter.launcher import MODEL_DIR, AdapterProcess, start_adapter
from decisionctl.commands.cli import main as decisionctl
from decisionctl.core.cases import load_cases
from decisionctl.core.labeled import Case

ROOT = Path(__file__).resolve().parents[1]
BALANCED = ROOT / "tools" / "decisionctl" / "data" / "position_balanced.jsonl"
PRIOR_REQUESTS = ROOT / "tools" / "decisionctl" / "data" / "prior_requests.jsonl"
MODES: dict[str, tuple[str, bool]] = {  # name -> (DECISION_ORDER_DEBIAS, with the fitted slot prior)
    "off": ("off", False),
    "reverse": ("reverse", False),
    "rotations": ("rotations", False),
    "adaptive": ("adaptive", False),
    "off+prior": ("off", True),
    "reverse+prior": ("reverse", True),
    "adaptive+prior": ("adaptive", True),
}


def slot_class(slot: int, n: int) -> str:
    return "first" if slot == 0 else "last" if slot == n - 1 else "middle"


def model_with_prior(target: Path) -> Path:
    """A copy of the bundled model directory (the GGUF hard-linked) whose manifest fit-prior rewrites."""
    target.mkdir(parents=True)
    for item in MODEL_DIR.iterdir():
        if item.suffix == ".gguf":
            os.link(item, target / item.name)
        elif item.suffix == ".json":
            shutil.copy2(item, target / item.name)
    return target


def fit(adapter: AdapterProcess, model_dir: Path, report: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    args = ["fit-prior", str(PRIOR_REQUESTS), "--url", adapter.url, "--manifest", str(model_dir / "manifest.json")]
    if decisionctl([*args, "--report", str(report)]) != 0:
        raise SystemExit("fit-prior failed")
    block = json.loads(report.read_text(encoding="utf-8"))
    return {"seconds": round(time.perf_counter() - t0, 1), "prior": block}


def balanced_set(adapter: AdapterProcess, client: httpx.Client, cases: list[Case]) -> dict[str, Any]:
    picked = {"first": 0, "middle": 0, "last": 0}
    right = dict(picked)
    correct, answers = 0, []
    cost: dict[str, list[float]] = {}
    orders: dict[str, list[int]] = {}
    for case in cases:
        r = client.post(adapter.url + "/v1/systemone", json=case.request())
        r.raise_for_status()
        body = r.json()
        answer = body["answers"]["q"]
        n = len(case.options)
        slot = case.options.index(answer["choice"])
        picked[slot_class(slot, n)] += 1
        right[slot_class(case.expected_index, n)] += 1
        correct += slot == case.expected_index
        cost.setdefault(str(n), []).append(body["x_timing_ms"]["questions"])
        orders.setdefault(str(n), []).append(answer["x_orders"])
        answers.append({"id": case.id, "choice": answer["choice"], "probabilities": answer["probabilities"]})
    total = len(cases)
    return {
        "cases": total,
        "accuracy": correct / total,
        "picked_share": {k: v / total for k, v in picked.items()},
        "right_share": {k: v / total for k, v in right.items()},
        "mean_orders": statistics.fmean(o for per_n in orders.values() for o in per_n),
        "per_options": {
            n: {"cases": len(cost[n]), "questions_ms": statistics.median(cost[n]), "mean_orders": statistics.fmean(o)}
            for n, o in sorted(orders.items())
        },
        "answers": answers,
    }


def agreement(mine: list[dict[str, Any]], reference: list[dict[str, Any]]) -> dict[str, Any]:
    same = sum(a["choice"] == b["choice"] for a, b in zip(mine, reference, strict=True))
    diff = max(
        abs(a["probabilities"][k] - p)
        for a, b in zip(mine, reference, strict=True)
        for k, p in b["probabilities"].items()
    )
    return {"same_pick": same / len(mine), "same_pick_count": same, "max_probability_difference": diff}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, help="only the first N cases of each option count (a dry run)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "position_bias.json")
    args = parser.parse_args()
    cases = load_cases(BALANCED)
    if args.limit:
        per_n: dict[int, list[Case]] = {}
        for case in cases:
            per_n.setdefault(len(case.options), []).append(case)
        cases = [c for group in per_n.values() for c in group[: args.limit]]
    started = time.perf_counter()
    results: dict[str, Any] = {
        "command": "benchmarks/position_bias.py" + (f" --limit {args.limit}" if args.limit else ""),
        "machine": {
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "gpu": "none",
            "python": platform.python_version(),
        },
        "fit_requests": str(PRIOR_REQUESTS.relative_to(ROOT)),
        "measured_on": str(BALANCED.relative_to(ROOT)),
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        prior_dir = model_with_prior(Path(tmp) / "model-with-prior")
        for name, (mode, with_prior) in MODES.items():
            env = {"DECISION_ORDER_DEBIAS": mode}
            adapter = start_adapter(Path(tmp) / name, model_dir=prior_dir if with_prior else MODEL_DIR, env=env)
            try:
                if name == "off":
                    results["fit"] = fit(adapter, prior_dir, Path(tmp) / "prior.json")
                    print("fit", json.dumps(results["fit"]["prior"]["slots"]), flush=True)
                with httpx.Client(timeout=600) as client:  # one keep-alive connection, as decisionctl keeps
                    results["modes"][name] = balanced_set(adapter, client, cases)
            finally:
                adapter.stop()
            row = {k: v for k, v in results["modes"][name].items() if k != "answers"}
            print(name, json.dumps(row), flush=True)
    reference = results["modes"]["rotations"]
    for name in ("adaptive", "adaptive+prior"):
        results["modes"][name]["against_rotations"] = agreement(results["modes"][name]["answers"], reference["answers"])
        results["modes"][name]["cost_against_rotations"] = {
            n: row["questions_ms"] / reference["per_options"][n]["questions_ms"]
            for n, row in results["modes"][name]["per_options"].items()
        }
    results["seconds"] = round(time.perf_counter() - started, 1)
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name, r in results["modes"].items():
        shares = " / ".join(f"{r['picked_share'][k]:.0%}" for k in ("first", "middle", "last"))
        costs = ", ".join(
            f"n={n}: {row['mean_orders']:.2f} orders {row['questions_ms']:.0f} ms"
            for n, row in r["per_options"].items()
        )
        extra = f"; vs rotations {r['against_rotations']}" if "against_rotations" in r else ""
        print(f"{name}: accuracy {r['accuracy']:.1%}; picked {shares}; {costs}{extra}")
    print(f"wrote {args.out} ({results['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
