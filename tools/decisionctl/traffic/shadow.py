"""A production and a shadow variant's captured answers to the same invocations side by side: agreement per
question, option-mix and action shifts, and the invocations they disagree on (by id, never text).

A shadow variant gets a copy of each sampled production request, and each variant's capture lies under its
own variant name. The two answers to one invocation are paired by its InferenceId (the caller's, the same in
both copies) or, without one, by SageMaker's eventId; the adapter's own `x_run.request_id` differs between
the variants. Unpaired answers are counted on each side.

The compare --shadow use case (compare_shadow) reads both captures, compares them and writes shadow.json; it
returns the text to print and the exit status.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.core.identity import IDENTITY_FIELDS
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.traffic import capture
from decisionctl.traffic.capture import NO_ACTION, CapturedAnswer, distribution, mix_of, pick

REPORT = "shadow.json"


class ShadowError(ValueError):
    """Captures that cannot be compared: not two variants, or no invocation answered by both."""


@dataclass(frozen=True)
class Side:
    name: str  # the variant, or where the answers came from
    answers: list[CapturedAnswer]


def split_variants(answers: Sequence[CapturedAnswer], production: str | None) -> tuple[Side, Side]:
    """One capture holding two variants, as production and shadow; `production` names the production one."""
    names = sorted({a.variant or "" for a in answers})
    if len(names) != 2 or "" in names:
        found = ", ".join(n or "(no variant in path)" for n in names) or "none"
        raise ShadowError(
            f"a single capture source must hold exactly two variants laid out as <variant>/yyyy/mm/dd/hh/, found: "
            f"{found}; or give the production and the shadow captures as two sources"
        )
    if production not in names:
        raise ShadowError(f"name the production variant with --production-variant: one of {', '.join(names)}")
    shadow = next(n for n in names if n != production)
    return (
        Side(production, [a for a in answers if a.variant == production]),
        Side(shadow, [a for a in answers if a.variant == shadow]),
    )


def side_of(label: str, answers: Sequence[CapturedAnswer]) -> Side:
    """A whole capture source as one side, named by its variant when all its answers share one."""
    variants = {a.variant for a in answers}
    name = next(iter(variants)) if len(variants) == 1 and None not in variants else label
    return Side(str(name), list(answers))


def _by_key(side: Side) -> tuple[dict[str, CapturedAnswer], int]:
    keyed: dict[str, CapturedAnswer] = {}
    repeated = 0
    for a in side.answers:
        repeated += a.pair_key in keyed
        keyed[a.pair_key] = a
    return keyed, repeated


def total_variation(a: dict[str, float], b: dict[str, float]) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def identity_of(side: Side) -> dict[str, Any]:
    """The run identity fields of a side's answers, with every value seen where they differ."""
    seen: dict[str, set[str]] = {}
    for a in side.answers:
        run = a.run.model_dump(mode="json") if a.run else {}
        for f in IDENTITY_FIELDS:
            seen.setdefault(f, set()).add(json.dumps(run.get(f), sort_keys=True))
    return {f: [json.loads(v) for v in sorted(values)] for f, values in seen.items()}


def compare(production: Side, shadow: Side, *, top: int = 20) -> dict[str, Any]:
    """The shadow report: paired invocations, per question agreement, mean/max total variation, option mix
    and action shares of each side, the action transitions, and every disagreement by id."""
    base, repeated_base = _by_key(production)
    new, repeated_new = _by_key(shadow)
    keys = [k for k in base if k in new]
    if not keys:
        raise ShadowError(
            f"no invocation was answered by both {production.name} ({len(base)}) and {shadow.name} ({len(new)}): "
            "pass InferenceId on InvokeEndpoint so the production and shadow captures pair"
        )
    questions: dict[str, dict[str, Any]] = {}
    disagreements: list[dict[str, Any]] = []
    only_one_side: Counter[str] = Counter()
    for key in keys:
        b, n = base[key], new[key]
        for qid in sorted(set(b.answers) | set(n.answers)):
            ab, an = b.answers.get(qid), n.answers.get(qid)
            if ab is None or an is None or ab.type != an.type:
                only_one_side[qid] += 1
                continue
            q = questions.setdefault(qid, {"type": ab.type, "pairs": [], "actions": Counter()})
            tv = total_variation(distribution(ab), distribution(an))
            q["pairs"].append((ab, an, tv))
            q["actions"][(ab.x_action or NO_ACTION, an.x_action or NO_ACTION)] += 1
            if pick(ab) != pick(an):
                disagreements.append(
                    {
                        "key": key,
                        "question_id": qid,
                        "production_request_id": b.request_id,
                        "shadow_request_id": n.request_id,
                        "production": pick(ab),
                        "shadow": pick(an),
                        "total_variation": tv,
                    }
                )
    report_questions = {}
    for qid, q in sorted(questions.items()):
        pairs = q["pairs"]
        agreed = sum(pick(ab) == pick(an) for ab, an, _ in pairs)
        tvs = [tv for _, _, tv in pairs]
        base_actions = Counter(b for b, _ in q["actions"].elements())
        new_actions = Counter(n for _, n in q["actions"].elements())
        report_questions[qid] = {
            "type": q["type"],
            "pairs": len(pairs),
            "agreed": agreed,
            "agreement": agreed / len(pairs),
            "mean_total_variation": sum(tvs) / len(tvs),
            "max_total_variation": max(tvs),
            "option_mix": {"production": mix_of(ab for ab, _, _ in pairs), "shadow": mix_of(an for _, an, _ in pairs)},
            "action_share": {
                "production": {k: v / len(pairs) for k, v in sorted(base_actions.items())},
                "shadow": {k: v / len(pairs) for k, v in sorted(new_actions.items())},
            },
            "action_transitions": {f"{b} -> {n}": c for (b, n), c in sorted(q["actions"].items())},
        }
    compared = sum(q["pairs"] for q in report_questions.values())
    disagreements.sort(key=lambda d: -float(d["total_variation"]))
    return {
        "production": {"variant": production.name, "answers": len(production.answers), "repeated": repeated_base},
        "shadow": {"variant": shadow.name, "answers": len(shadow.answers), "repeated": repeated_new},
        "paired": len(keys),
        "unpaired": {"production": len(base) - len(keys), "shadow": len(new) - len(keys)},
        "answered_on_one_side_only": dict(sorted(only_one_side.items())),
        "compared_answers": compared,
        "disagreed": len(disagreements),
        "disagreement_rate": len(disagreements) / compared if compared else 0.0,
        "questions": report_questions,
        "identity": {"production": identity_of(production), "shadow": identity_of(shadow)},
        "top": disagreements[:top],
        "disagreements": disagreements,
    }


def write_shadow(report: dict[str, Any], out: Path) -> Path:
    """OUT/shadow.json."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


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
            production, candidate = split_variants(base.answers, o.production_variant)
        else:
            new = capture.read_sources([o.new], s3_client=client)
            production, candidate = side_of("base", base.answers), side_of("new", new.answers)
        report = compare(production, candidate, top=o.top)
    except (capture.CaptureError, ShadowError) as exc:
        say(str(exc))
        return ShadowResult("", EXIT_FAILED)
    path = write_shadow(report, Path(o.out))
    text = f"{tables.shadow_comparison(report)}\nwrote {path}\n"
    limit = o.max_changed_rate
    if limit is not None and report["disagreement_rate"] > limit:
        say(f"{tables.pct(report['disagreement_rate'])} of answers disagree, more than --max-changed-rate {limit}")
        return ShadowResult(text, EXIT_FAILED)
    return ShadowResult(text, 0)
