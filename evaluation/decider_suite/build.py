"""Writes the decider suite (evaluation/decider/{fit,certify,test}.jsonl) from the four state kinds, or with --check
says whether the committed files are what this generator writes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation.decider_suite.agents import agent_step
from evaluation.decider_suite.compose import PARTS, Group, Pick, cases_of
from evaluation.decider_suite.moderation import post
from evaluation.decider_suite.tickets import ticket
from evaluation.decider_suite.tools import request

OUT = Path(__file__).resolve().parents[1] / "decider"
KINDS: dict[str, Callable[[Pick, str], Group]] = {"t": ticket, "a": agent_step, "m": post, "r": request}
# States per kind. Tickets have more: their refund question is the one the decider answers well enough to automate,
# and a band for one question needs more labeled cases than 95 states put in the certify part (DATASHEET.md).
STATES_PER_KIND = {"t": 400, "a": 95, "m": 95, "r": 95}
HEADER = (
    "# The decider suite's {part} part (evaluation/DATASHEET.md): written by evaluation/decider_suite/build.py, "
    "split by a hash of the case's state id. Regenerate: python -m evaluation.decider_suite.build\n"
)


def suite(states_per_kind: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every case, states in order and each state's questions together (the adapter's state cache then evaluates a
    state once)."""
    counts = STATES_PER_KIND if states_per_kind is None else states_per_kind
    cases: list[dict[str, Any]] = []
    for n in range(1, max(counts.values()) + 1):
        for prefix, make in KINDS.items():
            if n > counts[prefix]:
                continue
            gid = f"{prefix}{n:03d}"
            cases.extend(cases_of(make(Pick(f"decider-suite/{gid}"), gid)))
    return cases


def files(cases: list[dict[str, Any]]) -> dict[str, str]:
    return {
        part: HEADER.format(part=part)
        + "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases if c["split"] == part)
        for part in PARTS
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed file differs from what is generated")
    args = ap.parse_args(argv)
    written = files(suite())
    if args.check:
        stale = [
            p
            for p, text in written.items()
            if not (OUT / f"{p}.jsonl").is_file() or (OUT / f"{p}.jsonl").read_text(encoding="utf-8") != text
        ]
        print("up to date" if not stale else f"differ: {', '.join(stale)}")
        return 1 if stale else 0
    OUT.mkdir(exist_ok=True)
    for part, text in written.items():
        (OUT / f"{part}.jsonl").write_text(text, encoding="utf-8")
        print(part, text.count("\n") - 1, "cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
