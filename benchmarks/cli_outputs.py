"""decisionctl's outputs recorded for a before-and-after comparison of a change that should not alter them (a
structure pass): nine commands (evaluate, with --write-policy and with --fit-calibration, compare, batch run, fit-prior,
cost for dev and prod, decision-diff) run by each tree's decisionctl against one adapter on the bundled model; their
stdout, stderr, exit status and every file they write but figures, compared with run ids, request ids, latencies and
timestamps left out. Run alone (it holds the model):

    git worktree add /tmp/before HEAD
    .venv/bin/python benchmarks/cli_outputs.py /tmp/before .
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from decision_adapter.launcher import start_adapter

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tools/decisionctl/data/examples.jsonl"
VOLATILE = {
    "request_id",
    "latency_s",
    "state_source",
    "run",
    "busy_s",
    "partial_bytes",
    "base",
    "new",
    "created",
    "seconds",
    "records_per_s",
    "x_timing_ms",
    "x_evaluated_tokens",
}  # run ids, times, paths, cache hits: not behaviour


def commands(url: str, out: Path, artifact: Path) -> dict[str, list[str]]:
    manifest, cdk = str(artifact / "manifest.json"), str(ROOT / "cdk.json")
    ask = ["--url", url]
    return {
        "evaluate": ["evaluate", str(CASES), *ask, "--out", str(out / "eval")],
        "evaluate_policy": ["evaluate", str(CASES), *ask, "--out", str(out / "eval"), "--write-policy", manifest,
                            "--max-error", "0.3"],
        "evaluate_fit": ["evaluate", str(CASES), *ask, "--out", str(out / "fit"), "--fit-calibration",
                         "--manifest", manifest],
        "compare": ["compare", str(out / "eval"), str(out / "fit"), "--out", str(out / "comparison")],
        "batch": ["batch", "run", *ask, "--out", str(out / "batch"), str(CASES)],
        "fit_prior": ["fit-prior", *ask, "--manifest", manifest, "--report", str(out / "prior.json"),
                      str(ROOT / "tools/decisionctl/data/prior_requests.jsonl")],
        "cost_dev": ["cost", "--env", "dev", "--cdk-json", cdk, "--out", str(out / "cost_dev")],
        "cost_prod": ["cost", "--env", "prod", "--cdk-json", cdk, "--out", str(out / "cost_prod")],
        "decision_diff": ["decision-diff", str(ROOT / "evaluation/dev.json"), str(ROOT / "evaluation/dev.json"),
                          "--env", "dev", "--cdk-json", cdk, "--json", str(out / "diff.json"),
                          "--markdown", str(out / "diff.md")],
    }  # fmt: skip


def record(trees: dict[str, Path]) -> dict[str, Path]:
    """Each tree's outputs under a folder of its own, all against one adapter (this checkout's, the bundled model)."""
    adapter = start_adapter(Path(tempfile.mkdtemp()))
    outs = {}
    try:
        for name, tree in trees.items():
            out = outs[name] = Path(tempfile.mkdtemp(prefix=f"cli-{name}-"))
            artifact = out / "artifact"
            keep = shutil.ignore_patterns("evaluation-run", "*.gguf", "model.tar.gz")
            shutil.copytree(ROOT / ".cache/models/smollm2", artifact, ignore=keep)
            paths = f"{tree}/tools{os.pathsep}{tree}/containers{os.pathsep}{tree}/clients/python"
            env = {**os.environ, "PYTHONPATH": paths, "MPLBACKEND": "Agg"}
            main = "import sys; from decisionctl.commands.cli import main; sys.exit(main())"
            for label, args in commands(adapter.url, out, artifact).items():
                done = subprocess.run(
                    [sys.executable, "-c", main, *args], check=False, env=env, capture_output=True, text=True
                )
                for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
                    (out / f"{label}.{stream}").write_text(text.replace(str(out), "OUT").replace(adapter.url, "URL"))
                (out / f"{label}.rc").write_text(str(done.returncode))
                print(f"{name}: {label} exit {done.returncode}", flush=True)
    finally:
        adapter.stop()
    return outs


def steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "~" if k in VOLATILE else steady(v) for k, v in value.items()}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def steady_text(text: str) -> str:
    text = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{8}\b", "RUN", text)
    text = re.sub(r"\b[0-9a-f]{32}\b", "ID", text)
    text = re.sub(r"[0-9.]+ records/s over [0-9.]+ s", "RATE", text)
    return re.sub(r"20\d\d-\d\d-\d\dT[0-9:.+Z-]+", "TIME", text)


def read(path: Path) -> Any:
    text = path.read_text(errors="replace")
    try:
        if path.suffix == ".jsonl":
            return [json.loads(steady_text(json.dumps(steady(json.loads(line))))) for line in text.splitlines() if line]
        return json.loads(steady_text(json.dumps(steady(json.loads(text)))))
    except ValueError:
        return steady_text(text)


def compare(a: Path, b: Path) -> list[str]:
    """The files that differ between two recordings (or are in one only), figures aside."""
    files = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | {
        p.relative_to(b) for p in b.rglob("*") if p.is_file()
    }
    differ = []
    for rel in sorted(f for f in files if f.suffix != ".png"):
        if not (a / rel).exists() or not (b / rel).exists() or read(a / rel) != read(b / rel):
            differ.append(str(rel))
    print(f"{len(files)} files, {len(differ)} differ: {differ}")
    for rel in differ[:3]:
        print(rel, "before:", str(read(a / rel))[:300], "\nafter: ", str(read(b / rel))[:300])
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="a tree (a git worktree of the commit before)")
    parser.add_argument("after", type=Path, help="a tree (this checkout: .)")
    args = parser.parse_args()
    outs = record({"before": args.before.resolve(), "after": args.after.resolve()})
    sys.exit(1 if compare(outs["before"], outs["after"]) else 0)


if __name__ == "__main__":
    main()
