"""Cross-build drift (issue 46): how far the same GGUF's answers move between settings that differ between a laptop
and an endpoint (threads, batch size, flash attention), on the shipped suite, through the real adapter.

Each run starts the adapter on one environment's model with one setting, scores every case of the suite (as
record-evaluation and check-deployed do), and compares each case's probabilities with that environment's committed
record (2 threads, batch 512, flash attention off, the llama.cpp llama-cpp-python bundles): the largest change in
any option's probability, the flips and the recorded margin (top two) of each flipped answer. `--env dev` (the
default) is the bundled SmolLM2 against evaluation/dev.json; `--env prod` is the decider (`./dev decider` fetches
it) against evaluation/prod.json; `--model-dir` names another packaged artifact (your own model, with cdk.json's
record for the env made on it). One setting a run keeps each run short (`flock /tmp/cpu.lock` each); --summary
prints the table of all runs saved.

    flock /tmp/cpu.lock .venv/bin/python benchmarks/drift_bench.py --setting threads=4
    flock /tmp/cpu.lock .venv/bin/python benchmarks/drift_bench.py --env prod --setting threads=4
    .venv/bin/python benchmarks/drift_bench.py --summary
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from decision_adapter.launcher import MODEL_DIRS, library_env, start_adapter

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "drift.json"
SETTINGS = {  # name=value -> the adapter's environment
    "threads": "SM_LLAMA_CPP_THREADS",
    "batch": "SM_LLAMA_CPP_BATCH_SIZE",
    "flash_attn": "SM_LLAMA_CPP_FLASH_ATTN",
    "gpu_layers": "SM_LLAMA_CPP_N_GPU_LAYERS",  # a CUDA build of llama-cpp-python: benchmarks/gpu_bench.py
}


def measure(setting: str, env_name: str, lib: Path | None = None, model_dir: Path | None = None) -> dict[str, Any]:
    from decision_spec.evaluation_record import EvaluationConfig
    from decisionctl.core import scoring
    from decisionctl.core.cases import case_digest, parse_cases
    from decisionctl.review import decision_diff
    from decisionctl.review import record as records
    from decisionctl.review.deployed import compare, recorded_margin
    from decisionctl.transport import HttpSender

    cdk = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    evaluation = EvaluationConfig.model_validate(cdk["context"]["environments"][env_name]["evaluation"])
    record = json.loads((ROOT / evaluation.record).read_text(encoding="utf-8"))
    model_dir = model_dir or MODEL_DIRS[env_name]
    if record["artifact"]["model_file"] not in {p.name for p in model_dir.glob("*.gguf")}:
        raise SystemExit(f"{model_dir} does not hold {record['artifact']['model_file']} (./dev decider fetches it)")
    suite = ROOT / record["suite"]["path"]
    cases = parse_cases(suite.read_bytes(), suite)
    env = {}
    for item in filter(None, setting.split(",")):
        name, _, value = item.partition("=")
        env[SETTINGS[name]] = value
    if "SM_LLAMA_CPP_BATCH_SIZE" in env:
        env["SM_LLAMA_CPP_UBATCH_SIZE"] = env["SM_LLAMA_CPP_BATCH_SIZE"]
    if lib is not None:  # another llama.cpp build under the same adapter and bindings
        env |= library_env(lib)
        setting = ",".join(filter(None, [f"build={lib.name}", setting]))
    tmp = Path(tempfile.mkdtemp(prefix="drift-"))
    start = time.perf_counter()
    adapter = start_adapter(tmp, model_dir=model_dir, env=env)
    sender = HttpSender(adapter.url, timeout_s=600)
    try:
        run = scoring.score_cases(cases, sender, tmp / "out", restart=True)
    finally:
        sender.close()
        adapter.stop()
    digests = {c.id: case_digest(c) for c in cases}
    answers = {p.id: records.answer(p, digests[p.id], None, None) for p in run.predictions}
    recorded = record["answers"]
    deltas = {cid: decision_diff.max_delta(recorded[cid], a) or 0.0 for cid, a in answers.items()}
    flips = decision_diff.flips({cid: recorded[cid] for cid in answers}, answers)
    tolerance = evaluation.tolerance
    checked = compare(record, cases, run, tolerance)  # what check-deployed does with a variant's answers
    return {
        "env": env_name,
        "model": record["artifact"]["model_file"],
        "setting": setting or "threads=2 (as recorded)",
        "check_deployed": {
            "tolerance": tolerance.model_dump(),
            "passed": checked["passed"],
            "failures": checked["failures"],
            "flips_within_tolerance": checked["flips_within_tolerance"],
        },
        "threads": (run.identity or {}).get("hardware", {}).get("threads"),
        "llama_cpp_build": (run.identity or {}).get("llama_cpp_build"),
        "cases": len(answers),
        "errors": len(run.errors),
        "max_delta": max(deltas.values(), default=0.0),
        "mean_delta": sum(deltas.values()) / max(1, len(deltas)),
        "largest": sorted(deltas, key=lambda c: -deltas[c])[:3],
        "flips": [{"id": f["id"], "recorded_margin": recorded_margin(recorded[f["id"]])} for f in flips],
        "seconds": round(time.perf_counter() - start, 1),
        "answers": answers,  # each case's probabilities, for a caller comparing two runs (not saved)
    }


def summary() -> str:
    rows = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else []
    head = "| model | setting | cases | largest change | mean change | flips | recorded margins of flips | check | s |"
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        margins = ", ".join(f"{f['recorded_margin']:.4f}" for f in r["flips"]) or "-"
        lines.append(
            f"| {r['model']} | {r['setting']} | {r['cases']} |"
            f" {r['max_delta']:.4f} | {r['mean_delta']:.5f} | {len(r['flips'])} | "
            f"{margins} | {'pass' if r['check_deployed']['passed'] else 'fail'} | {r['seconds']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", default=None, help="e.g. threads=4, batch=64, flash_attn=true (comma-joined)")
    parser.add_argument("--env", default="dev", choices=sorted(MODEL_DIRS), help="whose model and record (default dev)")
    parser.add_argument(
        "--lib",
        type=Path,
        default=None,
        help="a folder holding another llama.cpp build's libllama.so and libggml*.so (llama-cpp-python's "
        "LLAMA_CPP_LIB_PATH): the same adapter and bindings on that build; its name labels the row",
    )
    parser.add_argument(
        "--model-dir", type=Path, default=None, help="the artifact the record was made on (default: the env's model)"
    )
    parser.add_argument("--summary", action="store_true", help="print the table of the runs saved")
    args = parser.parse_args()
    if args.summary or (args.setting is None and args.lib is None):
        print(summary())
        return 0
    row = measure(args.setting or "", args.env, args.lib, args.model_dir)
    row.pop("answers")
    rows = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else []
    rows = [r for r in rows if (r["env"], r["setting"]) != (row["env"], row["setting"])] + [row]
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
