"""A committed evaluation record held to four endpoints by `decisionctl check-deployed --url` (issue 46): the same
artifact at 4 threads and on another llama.cpp build (each should pass at the environment's tolerance), the suite
with one option reworded and the artifact under another calibration (each should fail, exit 1). Each endpoint is
the real adapter started on this machine; the CLI's Markdown summary is printed. Run alone under the CPU lock:

    flock /tmp/cpu.lock .venv/bin/python benchmarks/check_deployed_cases.py dev --lib /tmp/builds/llama.cpp-11434
    flock /tmp/cpu.lock .venv/bin/python benchmarks/check_deployed_cases.py prod --lib DIR 2 4   # cases 2 and 4

`--lib` is a folder of another llama.cpp build's shared libraries (drift_bench.py's `--lib`); prod's model is the
decider, which `./dev decider` fetches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from decision_adapter.launcher import MODEL_DIRS, library_env, start_adapter

ROOT = Path(__file__).resolve().parents[1]


def scratch_root(kind: str) -> Path:
    """A cdk.json root whose suite has the Billing option reworded (its 6 cases' hashes move)."""
    root = Path(tempfile.mkdtemp(prefix=f"ms2-{kind}-"))
    shutil.copy(ROOT / "cdk.json", root / "cdk.json")
    shutil.copytree(ROOT / "evaluation", root / "evaluation", ignore=shutil.ignore_patterns("decider*"))
    suite = root / "evaluation/support-suite.jsonl"
    suite.write_text(
        suite.read_text().replace(
            "Payments, invoices, refunds, charges", "Money matters: invoices, refunds and charges"
        )
    )
    return root


def recalibrated(model_dir: Path) -> Path:
    """The artifact with another temperature in its manifest (the GGUF linked, not copied)."""
    out = Path(tempfile.mkdtemp(prefix="ms2-cal-"))
    for f in model_dir.iterdir():
        if f.suffix == ".gguf":
            (out / f.name).symlink_to(f)
    manifest = json.loads((model_dir / "manifest.json").read_text())
    # a policy is bound to the calibration it was measured under, and the adapter refuses to serve it under another
    # (policy_refused): the recalibrated artifact serves none, as one would until its policy is measured again
    manifest.pop("policy", None)
    if "calibration" in manifest:  # the decider's fitted temperatures, each times 1.5
        manifest["calibration"]["temperature"] = {
            k: round(v * 1.5, 6) for k, v in manifest["calibration"]["temperature"].items()
        }
    else:  # SmolLM2 is served uncalibrated: a temperature of 1.5 on every type
        manifest["calibration"] = {"method": "temperature", "temperature": {"noul": 1.5, "choice": 1.5, "score": 1.5}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out


def run(env_name: str, label: str, *, env: dict[str, str], model_dir: Path, cdk_root: Path = ROOT) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ms2-"))
    t0 = time.perf_counter()
    adapter = start_adapter(tmp, model_dir=model_dir, env=env)
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "decisionctl.commands.cli",
                "check-deployed",
                "--env",
                env_name,
                "--url",
                adapter.url,
                "--cdk-json",
                str(cdk_root / "cdk.json"),
                "--out",
                str(tmp / "check"),
                "--json",
                str(tmp / "check.json"),
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        adapter.stop()
    print(f"## {env_name} / {label}: exit {out.returncode} ({time.perf_counter() - t0:.0f} s)")
    print("\n".join(out.stdout.strip().splitlines()[-14:]))
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env", choices=sorted(MODEL_DIRS))
    parser.add_argument("--lib", type=Path, required=True, help="another llama.cpp build's shared libraries")
    parser.add_argument("cases", nargs="*", help="which of 1-4 to run (default: all)")
    args = parser.parse_intermixed_args()
    d, build, only = MODEL_DIRS[args.env], args.lib.resolve(), set(args.cases)
    if not only or "1" in only:
        run(args.env, "same artifact, 4 threads", env={"SM_LLAMA_CPP_THREADS": "4"}, model_dir=d)
    if not only or "2" in only:
        run(args.env, f"same artifact, llama.cpp build {build.name}", model_dir=d, env=library_env(build))
    if not only or "3" in only:
        run(args.env, "the Billing option reworded in the suite", env={}, model_dir=d, cdk_root=scratch_root(args.env))
    if not only or "4" in only:
        run(args.env, "another calibration (temperatures x1.5)", env={}, model_dir=recalibrated(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
