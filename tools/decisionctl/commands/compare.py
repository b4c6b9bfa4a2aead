"""decisionctl compare: what changed between two evaluate runs of the same cases."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl import tables
from decisionctl.commands.compare_shadow import add_arguments as add_shadow_arguments
from decisionctl.commands.compare_shadow import run as run_shadow
from decisionctl.commands.options import UsageError, say
from decisionctl.evaluation import comparison
from decisionctl.exit_codes import EXIT_FAILED


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Compare two `evaluate` output directories of the same labeled cases: accuracy before and "
        "after, decisions that changed (fixed / broken, with an exact McNemar test), how far each case's "
        "distribution moved (total variation), and what the change does to the decisions automated at a "
        "threshold. Writes comparison.json and comparison.png into --out. Calls no endpoint."
    )
    p.add_argument("base", help="the baseline's evaluate --out directory")
    p.add_argument("new", nargs="?", help="the candidate's evaluate --out directory")
    p.add_argument(
        "--threshold",
        type=float,
        metavar="T",
        help="automate threshold to assess (default: the baseline's recommended one, if it had one)",
    )
    p.add_argument(
        "--max-changed-rate",
        type=float,
        metavar="R",
        help="exit 1 if more than this share of decisions changed (a regression gate, e.g. 0.02)",
    )
    p.add_argument("--top", type=int, default=10, help="most changed cases to list (default 10)")
    p.add_argument("--out", default="comparison", metavar="DIR", help="output directory (default ./comparison)")
    add_shadow_arguments(p)


def run(args: argparse.Namespace) -> int:
    if args.shadow:
        return run_shadow(args)
    if args.new is None:
        raise UsageError("compare needs the baseline's and the candidate's evaluate directories (or --shadow)")
    try:
        result, written = comparison.compare_runs(
            Path(args.base), Path(args.new), Path(args.out), threshold=args.threshold, top=args.top
        )
    except comparison.CompareError as exc:
        say(str(exc))
        return EXIT_FAILED
    print(tables.comparison(result.report))
    if result.report["band_changes"] is not None:  # both runs wrote a policy
        print(tables.band_changes(result.report["band_changes"]))
    print("wrote " + ", ".join(str(p) for p in written))
    overall = result.report["overall"]
    limit = args.max_changed_rate
    if limit is not None and overall["decisions_changed_rate"] > limit:
        changed = tables.pct(overall["decisions_changed_rate"])
        say(f"{changed} of decisions changed, more than --max-changed-rate {limit}")
        return EXIT_FAILED
    return 0
