"""decisionctl fit-prior: fit the model's slot prior from unlabeled decision requests and write it into a manifest."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from decisionctl.certification.prior_fit import fit_slot_prior
from decisionctl.commands.options import add_retry, add_target, retry_policy, say, sender
from decisionctl.exit_codes import EXIT_FAILED


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Send every choice question of an unlabeled JSON Lines file of decision requests once per rotation of its "
        "options, average the raw slot distributions (x_slot_probabilities) per option count, and write the result "
        "into the manifest's calibration as slot_prior, bound to the endpoint's model sha256 and prompt template. "
        "The adapter then divides each order's distribution by it. Lines with an expected answer are refused."
    )
    p.add_argument("requests", type=Path, help="JSON Lines of decision requests ({state, questions}), no labels")
    add_target(p)
    p.add_argument("--manifest", type=Path, required=True, help="manifest.json to write the prior into")
    p.add_argument("--report", type=Path, help="also write the fitted prior and its provenance here as JSON")
    add_retry(p)


def run(args: argparse.Namespace) -> int:
    written = fit_slot_prior(
        args.requests,
        args.manifest,
        connect=partial(sender, args, max_connections=1),
        retry=retry_policy(args),
        report=args.report,
        say=say,
    )
    return 0 if written else EXIT_FAILED
