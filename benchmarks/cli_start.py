"""How light decisionctl starts, for a tree: the modules `decisionctl --help` and `decisionctl decide --help` load
(all, decisionctl's, the shared package's and the adapter's; matplotlib and numpy or not) and the time each takes to
start, the median of 10 fresh interpreters. Run alone:

    .venv/bin/python benchmarks/cli_start.py .
    git worktree add /tmp/before <commit> && .venv/bin/python benchmarks/cli_start.py /tmp/before

(a tree from before issue 47 has its entry point at decisionctl.cli: pass --entry decisionctl.cli).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBE = """
import contextlib, io, json, sys
sys.argv = ["decisionctl", *ARGS]
from ENTRY import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
names = sorted(sys.modules)
print(json.dumps({
    "modules": len(names),
    "decisionctl": sum(m.split(".")[0] == "decisionctl" for m in names),
    "decision_spec": sum(m.split(".")[0] == "decision_spec" for m in names),
    "decision_adapter": sum(m.split(".")[0] == "decision_adapter" for m in names),
    "matplotlib": "matplotlib" in sys.modules,
    "numpy": "numpy" in sys.modules,
}))
"""


def measure(tree: Path, entry: str, args: list[str], runs: int = 10) -> dict[str, object]:
    paths = os.pathsep.join(str(tree / p) for p in ("tools", "containers", "clients/python"))
    env = {**os.environ, "PYTHONPATH": paths}
    code = PROBE.replace("ARGS", repr(args)).replace("ENTRY", entry)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return {"command": " ".join(["decisionctl", *args]), **found, "start_s": round(statistics.median(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--entry", default="decisionctl.commands.cli", help="the module holding main()")
    args = parser.parse_args()
    for command in (["--help"], ["decide", "--help"]):
        print(json.dumps(measure(args.tree.resolve(), args.entry, command)))


if __name__ == "__main__":
    main()
