"""The evaluate use case: labeled cases scored, measured and certified; the results, figures, temperatures, policy."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from decision_spec.manifest import Manifest, read_manifest
from decision_spec.policy import Policy

from decisionctl import tables
from decisionctl.certification import manifests, policies
from decisionctl.certification.automation import AUTOMATION_DIR, write_automation_plots
from decisionctl.core import bands, run_plots, scoring, temperatures
from decisionctl.core.cases import CaseError, load_cases
from decisionctl.core.labeled import PREDICTIONS, Case, Run
from decisionctl.core.results import evaluation_results, write_results
from decisionctl.core.served_calibration import PolicyRefused, served_intercept
from decisionctl.transport import RetryPolicy, Sender


@dataclass(frozen=True)
class CasesToScore:
    """The labeled cases, the directory their predictions go to, and how to reach the endpoint."""

    path: Path
    out: Path
    connect: Callable[[], Sender] | None  # opens the endpoint; None: report on the predictions `out` holds
    concurrency: int
    restart: bool
    retry: RetryPolicy


@dataclass(frozen=True)
class Thresholds:
    """The certification's E and C, and what the point-estimate recommendation aims at."""

    max_error: float
    confidence: float
    target_accuracy: float
    min_support: int
    review_accuracy: float


@dataclass(frozen=True)
class TemperatureFit:
    """Fit per-type temperatures on a part of the cases; write them into `manifest` (None: print them)."""

    holdout: float
    seed: int
    manifest: Path | None


@dataclass(frozen=True)
class PolicyWrite:
    """Write the certified bands into `manifest` as its policy."""

    manifest: Path
    review_input_flags: list[str] | None


@dataclass
class Evaluated:
    """Whether the run failed or was interrupted, and what evaluate prints on stdout, block by block."""

    failed: bool = False
    interrupted: bool = False  # scoring stopped by Ctrl-C: the same command resumes it
    printed: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(f"{block}\n" for block in self.printed)


def evaluate(
    cases_to_score: CasesToScore,
    thresholds: Thresholds,
    *,
    fit: TemperatureFit | None,
    policy: PolicyWrite | None,
    say: Callable[[str], None],
) -> Evaluated:
    """The whole run; progress and refusals go to `say`, what the command prints comes back."""
    refused = _refused(cases_to_score, thresholds, fit, policy)
    if refused:
        say(refused)
        return Evaluated(failed=True)
    try:
        cases = load_cases(cases_to_score.path)
    except CaseError as exc:
        say(f"{cases_to_score.path}: {exc}")
        return Evaluated(failed=True)
    out = cases_to_score.out
    scored = _score(cases_to_score, cases, say)
    if scored is None:
        return Evaluated(failed=True)
    say(f"{scored.sent} cases sent, {scored.skipped} already scored in {out / PREDICTIONS}")
    if scored.interrupted:
        say("interrupted: run the same command again to score the rest")
        return Evaluated(interrupted=True)
    if not scored.predictions:
        for e in scored.errors[:5]:
            say(f"{e['id']}: {e['error']}")
        say("no case was scored")
        return Evaluated(failed=True)
    results = evaluation_results(
        scored,
        cases,
        cases_to_score.path,
        target_accuracy=thresholds.target_accuracy,
        min_support=thresholds.min_support,
        review_accuracy=thresholds.review_accuracy,
        max_error=thresholds.max_error,
        confidence=thresholds.confidence,
    )
    written = run_plots.write_plots(out, scored.predictions, results["recommendation"]["overall"])
    automation = write_automation_plots(out, results["certification"])
    done = Evaluated()
    done.printed.append(tables.evaluation(results))
    done.printed.append(
        "\nThe recommendation above is a point estimate on these cases; the policy is written from this:"
    )
    done.printed.append(tables.certification(results["certification"]))
    if fit is not None:
        done.printed.append("")
        done.failed = not _fit(fit, cases_to_score, scored, results, printed=done.printed, say=say)
        if "calibration_fit" in results:  # the fit ran and drew its figure
            written.append(out / run_plots.HELDOUT_PNG)
    if policy is not None:
        done.printed.append("")
        keys = bands.question_keys(cases)
        done.failed = not _write_policy(policy, scored, results, keys, printed=done.printed, say=say) or done.failed
    written.insert(0, write_results(out, results))
    if scored.errors:
        say(
            f"{len(scored.errors)} cases failed (listed in results.json; a re-run retries them), e.g. "
            f"{scored.errors[0]['id']}: {scored.errors[0]['error']}"
        )
        done.failed = True
    identity = results["identity"] or {}
    done.printed.append(
        f"model sha256 {identity.get('model_sha256', 'not reported')}, calibration "
        f"{json.dumps((identity.get('calibration') or {}), sort_keys=True)}"
    )
    done.printed.append(
        "wrote " + ", ".join(str(p) for p in written) + f" and {len(automation)} figures in {out / AUTOMATION_DIR}"
    )
    return done


def _refused(
    cases: CasesToScore, thresholds: Thresholds, fit: TemperatureFit | None, policy: PolicyWrite | None
) -> str | None:
    """Why these options cannot run together, or None."""
    for name, value in (
        ("--max-error", thresholds.max_error),
        ("--confidence", thresholds.confidence),
        ("--review-accuracy", thresholds.review_accuracy),
    ):
        if not 0.0 < value < 1.0:
            return f"{name} must be between 0 and 1 (exclusive), got {value}"
    if cases.restart and cases.connect is None:
        return "--restart forgets the saved predictions: it needs --url or --sagemaker-endpoint to score them again"
    if policy is not None and fit is not None:
        return (
            "--write-policy and --fit-calibration in one run would bind thresholds measured under the old calibration "
            "to the new one: fit first, restart the adapter, then evaluate again with --write-policy"
        )
    return None


def _score(to_score: CasesToScore, cases: list[Case], say: Callable[[str], None]) -> Run | None:
    """The cases scored into --out (without an endpoint: only its saved predictions read), or None, said why."""
    endpoint = None if to_score.connect is None else to_score.connect()
    try:
        return scoring.score_cases(
            cases,
            endpoint,
            to_score.out,
            concurrency=to_score.concurrency,
            policy=to_score.retry,
            restart=to_score.restart,
        )
    except scoring.IdentityChanged as exc:
        say(str(exc))
    except scoring.NotScored as exc:
        say(f"{exc}: give --url or --sagemaker-endpoint to score them")
    finally:
        if endpoint is not None:
            endpoint.close()
    return None


def _fit(
    fit: TemperatureFit,
    cases: CasesToScore,
    scored: Run,
    results: dict[str, Any],
    *,
    printed: list[str],
    say: Callable[[str], None],
) -> bool:
    identity = scored.identity or {}
    if fit.manifest is not None:  # refused before the fit: its numbers would be measured under another calibration
        try:
            manifests.served_under(fit.manifest, identity)
        except manifests.ManifestRefused as exc:
            say(str(exc))
            return False
    provenance = {
        "cases_file": cases.path.name,
        "cases_sha256": results["cases_sha256"],
        "model_sha256": identity.get("model_sha256"),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        fitted = temperatures.fit(
            scored.predictions, holdout=fit.holdout, seed=fit.seed, served_intercept=served_intercept(identity, "noul")
        )
        run_plots.write_heldout_plot(cases.out, fitted.pop("heldout_before"), fitted.pop("heldout_after"))
        calibration = temperatures.to_calibration(fitted, provenance)
    except ValueError as exc:
        say(f"cannot fit calibration: {exc}")
        return False
    results["calibration_fit"] = {**fitted, "calibration": calibration.model_dump(mode="json")}
    printed.append(tables.calibration(fitted))
    if fit.manifest is None:
        printed.append(json.dumps({"calibration": calibration.model_dump(mode="json")}, indent=2, sort_keys=True))
        return True
    try:
        said = manifests.write_temperatures(
            fit.manifest, calibration, served=scored.identity, improved=fitted["improved"]
        )
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return False
    say(said)
    return True


def _write_policy(
    write: PolicyWrite,
    scored: Run,
    results: dict[str, Any],
    keys: dict[str, str],
    *,
    printed: list[str],
    say: Callable[[str], None],
) -> bool:
    created = datetime.now(UTC).date()
    try:
        manifest, policy = _certified_policy(
            write.manifest,
            len(scored.errors),
            results,
            keys,
            created=created,
            review_input_flags=write.review_input_flags,
        )
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return False
    results["policy"] = policy.model_dump(by_alias=True, mode="json")
    printed.append(tables.policy_actions(policy.version, policies.action_table(scored.predictions, policy, keys)))
    say(manifests.write_policy(write.manifest, manifest, policy))
    return True


def _certified_policy(
    path: Path,
    failed: int,
    results: Mapping[str, Any],
    keys: Mapping[str, str],
    *,
    created: date,
    review_input_flags: Sequence[str] | None = None,
) -> tuple[Manifest, Policy]:
    """The manifest at `path` and the policy evaluate's `results` certify for it (`failed`: cases not scored)."""
    if failed or not results["complete"]:
        raise manifests.ManifestRefused(
            f"{path} was not changed: {failed} cases failed, a policy needs every case scored"
        )
    manifest = read_manifest(path)
    try:
        policy = policies.from_results(
            results, manifest, created=created, keys=keys, review_input_flags=review_input_flags
        )
        return manifest, policy
    except PolicyRefused as exc:
        raise manifests.ManifestRefused(f"{path} was not changed: {exc}") from exc
