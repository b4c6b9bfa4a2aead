"""decisionctl outcomes: captured answers joined with the final answers people gave, as labeled cases."""

from __future__ import annotations

import argparse
import dataclasses

from decisionctl.commands.options import say
from decisionctl.traffic import outcomes_job


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Read SageMaker data capture (output-only JSON Lines: local files, directories or s3:// prefixes) and an "
        "outcomes file (CSV or JSON Lines of request_id, question_id, final_answer), join them, and write "
        "OUT/cases.jsonl (labeled cases without text) with OUT/evaluate/ (the captured answers as evaluate's saved "
        "predictions), so `decisionctl evaluate OUT/cases.jsonl --out OUT/evaluate` re-certifies on traffic "
        "without sending anything. Reports per question the human-reversal rate of automated answers and, with "
        "--policy, each automate band's error on traffic against its promised bound. Writes OUT/outcomes.json."
    )
    p.add_argument("capture", nargs="+", help="capture files, directories of .jsonl files, or s3:// prefixes")
    p.add_argument("--outcomes", required=True, metavar="FILE", help="the final answers: .csv or JSON Lines")
    p.add_argument("--variant", help="read only this variant's capture (<variant>/yyyy/mm/dd/hh/ in the path)")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="a manifest.json with a policy block, or a policy block alone: measure its bands",
    )
    p.add_argument(
        "--max-reversal-rate",
        type=float,
        metavar="R",
        help="exit 1 if any question's reversal rate of automated answers is above R (a monitoring gate)",
    )
    p.add_argument("--region", help="AWS region of the capture bucket (default: from the AWS configuration)")
    p.add_argument("--out", default="outcomes", metavar="DIR", help="output directory (default ./outcomes)")


def run(args: argparse.Namespace) -> int:
    fields = dataclasses.fields(outcomes_job.OutcomesOptions)
    options = outcomes_job.OutcomesOptions(**{f.name: getattr(args, f.name) for f in fields})
    result = outcomes_job.label_outcomes(options, say=say)
    print(result.text, end="")
    return result.status
