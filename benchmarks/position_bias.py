"""Order-debiasing modes side by side on the bundled model: which slots it picks, and what each extra order costs.

For each DECISION_ORDER_DEBIAS mode (off, reverse, rotations) one adapter process:
- the position-balanced labeled set (tools/decisionctl/data/position_balanced.jsonl, every slot right
  equally often): accuracy, and the share of answers that picked the first, a middle or the last slot
  against the share of cases where that slot was right;
- the cost of one question on a resident state (the state evaluated by the request before): the median
  of the adapter's own `x_timing_ms.questions` per option count, and per extra order against `off`.

    .venv/bin/python benchmarks/position_bias.py [--repeat 7] [--out benchmarks/position_bias.json]

It takes a few minutes on 2 cores and loads one adapter at a time; run it when the machine is otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from decision_adapter.launcher import AdapterProcess, start_adapter
from decisionctl.cases import load_cases

ROOT = Path(__file__).resolve().parents[1]
STATE = (
    "Hello, I was charged twice for my March invoice (order #4471) and the refund I was promised last week "
    "still has not arrived. I have emailed three times and called once. "
) * 14  # about 600 tokens, as adapter_bench.py's long state

BALANCED = ROOT / "tools" / "decisionctl" / "data" / "position_balanced.jsonl"
MODES = ("off", "reverse", "rotations")


def post(adapter: AdapterProcess, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(adapter.url + "/v1/systemone", json=body)
    r.raise_for_status()
    return dict(r.json())


def slot_class(slot: int, n: int) -> str:
    return "first" if slot == 0 else "last" if slot == n - 1 else "middle"


def balanced_set(adapter: AdapterProcess, client: httpx.Client) -> dict[str, Any]:
    cases = load_cases(BALANCED)
    picked = {"first": 0, "middle": 0, "last": 0}
    right = dict(picked)
    correct = 0
    for case in cases:
        body = post(adapter, client, case.request())
        answer = body["answers"]["q"]
        slot = case.options.index(answer["choice"])
        n = len(case.options)
        picked[slot_class(slot, n)] += 1
        right[slot_class(case.expected_index, n)] += 1
        correct += slot == case.expected_index
    total = len(cases)
    return {
        "cases": total,
        "accuracy": correct / total,
        "picked_share": {k: v / total for k, v in picked.items()},
        "right_share": {k: v / total for k, v in right.items()},
    }


def question_cost(adapter: AdapterProcess, client: httpx.Client, repeat: int) -> dict[str, Any]:
    """Median questions-phase time (ms) of one n-option question on the resident state, per n."""
    families: dict[int, dict[str, Any]] = {}
    for case in load_cases(BALANCED):
        families.setdefault(len(case.options), case.question)
    state = f"Cost probe. {STATE}"
    post(adapter, client, {"state": state, "questions": {"warm": families[3]}})
    out: dict[str, Any] = {}
    for n, question in sorted(families.items()):
        times, orders = [], 0
        for _ in range(repeat):
            body = post(adapter, client, {"state": state, "questions": {"q": question}})
            assert body["x_run"]["state_source"] == "resident", body["x_run"]["state_source"]
            times.append(body["x_timing_ms"]["questions"])
            orders = body["answers"]["q"]["x_orders"]
        out[str(n)] = {"orders": orders, "questions_ms": statistics.median(times)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="timed questions per option count and mode")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "position_bias.json")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            adapter = start_adapter(Path(tmp) / mode, env={"DECISION_ORDER_DEBIAS": mode})
            try:
                with httpx.Client(timeout=600) as client:  # one keep-alive connection, as decisionctl keeps
                    results[mode] = {
                        "balanced": balanced_set(adapter, client),
                        "cost": question_cost(adapter, client, args.repeat),
                    }
            finally:
                adapter.stop()
            print(mode, json.dumps(results[mode]["balanced"]), flush=True)
    base = results["off"]["cost"]
    for mode in MODES[1:]:
        for n, row in results[mode]["cost"].items():
            extra = row["orders"] - base[n]["orders"]
            row["ms_per_extra_order"] = (row["questions_ms"] - base[n]["questions_ms"]) / extra if extra else None
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for mode in MODES:
        b, c = results[mode]["balanced"], results[mode]["cost"]
        shares = ", ".join(f"{k} {v:.0%} (right {b['right_share'][k]:.0%})" for k, v in b["picked_share"].items())
        costs = ", ".join(f"n={n}: {r['orders']} orders {r['questions_ms']:.0f} ms" for n, r in c.items())
        print(f"{mode}: accuracy {b['accuracy']:.1%}; picked {shares}; {costs}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
