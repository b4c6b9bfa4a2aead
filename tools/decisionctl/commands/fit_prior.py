"""decisionctl fit-prior: fit the model's slot prior from unlabeled decision requests and write it into a manifest."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from decision_adapter.manifest import read_manifest

from decisionctl.certification import manifests
from decisionctl.commands.options import EXIT_FAILED, add_retry, add_target, retry_policy, say, transport
from decisionctl.evaluation.slot_prior import FitError, choice_items, fit_prior, to_slot_prior

NAME = "fit-prior"
HELP = "fit the model's prior over option slots from unlabeled requests into manifest.json"


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
    try:
        manifest = read_manifest(args.manifest)
        items = list(choice_items(args.requests))
    except (OSError, ValueError) as exc:
        say(str(exc))
        return EXIT_FAILED
    say(f"fit-prior: {len(items)} choice questions, {sum(len(i.options) for i in items)} reads")
    endpoint = transport(args, max_connections=1)
    try:
        fit = fit_prior(endpoint, items, retry_policy(args), say)
        prior = to_slot_prior(fit, args.requests, created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    except FitError as exc:
        say(str(exc))
        return EXIT_FAILED
    finally:
        endpoint.close()
    try:
        manifests.write_slot_prior(args.manifest, manifest, prior)
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return EXIT_FAILED
    block = prior.model_dump(mode="json")
    if args.report is not None:
        args.report.write_text(json.dumps(block, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for n, slots in block["slots"].items():
        say(f"  {n} options ({block['fitted_on']['questions'][n]} questions): " + " ".join(f"{p:.3f}" for p in slots))
    say(f"wrote slot_prior into {args.manifest}")
    if manifest.policy is not None:
        say(
            "the manifest's policy was measured under the previous calibration, so the adapter will refuse it: "
            "measure it again with `decisionctl evaluate --write-policy`"
        )
    return 0
