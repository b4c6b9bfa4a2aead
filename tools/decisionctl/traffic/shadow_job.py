"""The compare --shadow use case: two variants' captured answers read and compared, shadow.json written; the text to
print and the exit status returned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.traffic import capture, shadow


@dataclass(frozen=True)
class ShadowOptions:
    """What `decisionctl compare --shadow` was asked, as plain values (its arguments' names)."""

    base: str
    new: str | None = None
    production_variant: str | None = None
    region: str | None = None
    top: int = 10
    out: str = "comparison"
    max_changed_rate: float | None = None


@dataclass(frozen=True)
class ShadowResult:
    text: str
    status: int


def compare_shadow(o: ShadowOptions, *, say: Callable[[str], None]) -> ShadowResult:
    """Pair the production and the shadow variant's answers, write OUT/shadow.json; `say` hears the failures."""

    def client() -> Any:
        import boto3

        return boto3.client("s3", region_name=o.region)

    try:
        base = capture.read_sources([o.base], s3_client=client)
        if o.new is None:
            production, candidate = shadow.split_variants(base.answers, o.production_variant)
        else:
            new = capture.read_sources([o.new], s3_client=client)
            production, candidate = shadow.side_of("base", base.answers), shadow.side_of("new", new.answers)
        report = shadow.compare(production, candidate, top=o.top)
    except (capture.CaptureError, shadow.ShadowError) as exc:
        say(str(exc))
        return ShadowResult("", EXIT_FAILED)
    path = shadow.write_shadow(report, Path(o.out))
    text = f"{tables.shadow_comparison(report)}\nwrote {path}\n"
    limit = o.max_changed_rate
    if limit is not None and report["disagreement_rate"] > limit:
        say(f"{tables.pct(report['disagreement_rate'])} of answers disagree, more than --max-changed-rate {limit}")
        return ShadowResult(text, EXIT_FAILED)
    return ShadowResult(text, 0)
