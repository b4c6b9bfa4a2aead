"""What a team gets from the decider, from `decisionctl evaluate` runs on the three parts of the decider suite
(evaluation/decider/: fit, certify, test; evaluation/DATASHEET.md). Reads the runs' predictions.jsonl, calls no
endpoint, so it needs no lock:

    .venv/bin/python benchmarks/decider_eval.py --runs .cache/decider-runs --timed fit,certify \
        --policy '10 %=.cache/models/qwen2.5-coder-1.5b/manifest.json' \
        --policy '5 %=.cache/decider-runs/policy-5.json' \
        --shipped .cache/models/qwen2.5-coder-1.5b/manifest.json \
        --json benchmarks/decider_results.json --figures docs

The runs are `<runs>/<part>-served/` (each `evaluate evaluation/decider/<part>.jsonl --out ...`); a part scored
under a calibration is brought back to the decider as packaged (no calibration) from its identity.json, exactly.
It prints, as Markdown: accuracy (95 % Wilson interval) and, for choice, macro-F1 (95 % bootstrap interval) per task
family, per difficulty and per tag, on every scored case as packaged (nothing is fitted on the model's answers for
these); ECE as packaged and after a temperature per type fitted on the fit part, on the test part; the yes/no lean
as packaged, with an intercept fitted on the fit part and under the shipped calibration, on the test part; the
score questions' lean to levels; each policy's automate / review / abstain shares and the error observed among its
automated answers on the test part (never certified on), under the policy manifest's calibration; the floor under
any policy (decider_floor.py); latency per decision. Figures: decider_reliability.png (test part, before and after)
and decider_coverage.png (with the refund question's curve under the shipped calibration).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from decision_spec.manifest import Manifest, read_manifest
from decisionctl.core import metrics, temperatures
from decisionctl.core.labeled import Prediction

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decider_stats as st  # a sibling script, not a package
from decider_floor import floor_lines  # a sibling script too

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("fit", "certify", "test")


def load_cases() -> dict[str, dict[str, Any]]:
    cases = {}
    for part in PARTS:
        for line in (ROOT / "evaluation" / "decider" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                case = json.loads(line)
                cases[case["id"]] = case
    return cases


def load_predictions(runs: Path) -> dict[str, list[Prediction]]:
    """Each part's predictions as the decider makes them as packaged (temperature 1, no intercept): a part scored
    under a calibration (its identity.json's) is brought back exactly, the intercept taken off and the temperature
    undone, so that accuracy pools across the parts."""
    out: dict[str, list[Prediction]] = {}
    for part in PARTS:
        path = runs / f"{part}-served" / "predictions.jsonl"
        lines = path.read_text().splitlines() if path.is_file() else []
        latest = {json.loads(line)["id"]: json.loads(line) for line in lines if line.strip()}
        identity = path.parent / "identity.json"
        served = json.loads(identity.read_text()).get("calibration") or {} if identity.is_file() else {}
        out[part] = st.served_under(
            [Prediction.from_json(p) for p in latest.values()], None, (served.get("intercept") or {}).get("noul", 0.0)
        )
    return out


def fmt(row: dict[str, Any]) -> str:
    lo, hi = row["accuracy_ci"]
    text = f"| {row['cases']} | {row['accuracy']:.1%} ({lo:.0%}-{hi:.0%}) |"
    if "macro_f1" in row:
        flo, fhi = row["macro_f1_ci"]
        text += f" {row['macro_f1']:.2f} ({flo:.2f}-{fhi:.2f}) |"
    else:
        text += " |"
    return text


def grouped(preds: list[Prediction], key: Any) -> dict[str, list[Prediction]]:
    groups: dict[str, list[Prediction]] = defaultdict(list)
    for p in preds:
        for k in key(p):
            groups[k].append(p)
    return dict(sorted(groups.items()))


def accuracy_tables(preds: list[Prediction], cases: dict[str, dict[str, Any]], report: dict[str, Any]) -> list[str]:
    lines = []
    for title, key in (
        ("task family (question type)", lambda p: [f"{cases[p.id]['family']} ({p.type})"]),
        ("question type", lambda p: [p.type]),
        ("difficulty", lambda p: [cases[p.id]["difficulty"]]),
        ("tag", lambda p: cases[p.id]["tags"] or ["(none)"]),
    ):
        rows = {k: st.accuracy_row(g) for k, g in grouped(preds, key).items()}
        report[f"by_{title.split()[0]}"] = rows
        lines += ["", f"| {title} | cases | accuracy (95 % CI) | macro-F1 (95 % CI) |", "|---|---|---|---|"]
        lines += [f"| {k} " + fmt(r) for k, r in rows.items()]
    overall = st.accuracy_row(preds)
    report["overall"] = overall
    lines += ["", "| all scored cases " + fmt(overall)]
    return lines


def calibration_lines(
    parts: dict[str, list[Prediction]], report: dict[str, Any], figures: Path | None, shipped: Manifest | None = None
) -> list[str]:
    fit, test = parts["fit"], parts["test"]
    if not fit or not test:
        return ["", "(calibration: the fit and test parts are not both scored)"]
    exponents = st.fit_temperatures(fit)
    after = st.calibrated(test, exponents)
    noul_fit = [p for p in fit if p.type == "noul"]
    b = st.fit_intercept(noul_fit)
    noul_test = [p for p in test if p.type == "noul"]
    shifted = [st.shifted(p, b) for p in noul_test]
    groups = [("as packaged", noul_test), ("intercept fitted on fit", shifted)]
    calibration = shipped.calibration if shipped is not None else None
    if shipped is not None and calibration is not None:
        t, b_shipped = calibration.for_type("noul"), calibration.intercept_for("noul")
        name = f"shipped calibration (T {t:.3g}, b {b_shipped:+.3g})"
        groups.append((name, st.served_under(noul_test, shipped)))
    lean = {
        name: {
            "said_yes": sum(p.predicted_index == 0 for p in g) / len(g),
            "is_yes": sum(p.expected_index == 0 for p in g) / len(g),
            "accuracy": metrics.accuracy(g),
            "ece": metrics.ece(g),
            "log_loss": temperatures.nll(g, 1.0),
        }
        for name, g in groups
    }
    # what no signal at all gets: the answer more common on fit, always, at fit's rate of yes
    fit_yes = sum(p.expected_index == 0 for p in noul_fit) / len(noul_fit)
    test_yes = sum(p.expected_index == 0 for p in noul_test) / len(noul_test)
    lean[f"always {'yes' if fit_yes >= 0.5 else 'no'}, at P(yes) {fit_yes:.2f} (fit's rate)"] = {
        "said_yes": float(fit_yes >= 0.5),
        "is_yes": test_yes,
        "accuracy": test_yes if fit_yes >= 0.5 else 1 - test_yes,
        "ece": abs(fit_yes - test_yes),
        "log_loss": -(test_yes * math.log(fit_yes) + (1 - test_yes) * math.log(1 - fit_yes)),
    }
    ranking_auc = st.auc(
        [p.probs[0] for p in noul_test if p.expected_index == 0],
        [p.probs[0] for p in noul_test if p.expected_index == 1],
    )
    report["calibration"] = {
        "temperatures_T": {t: 1 / a for t, a in exponents.items()},
        "ece_test_served": metrics.ece(test),
        "ece_test_after": metrics.ece(after),
        "ece_test_by_type": {
            t: [metrics.ece(g), metrics.ece(st.calibrated(g, exponents))] for t, g in metrics.by_type(test).items()
        },
        "noul_intercept": b,
        "noul_lean": lean,
        "noul_ranking_auc": ranking_auc,
    }
    if figures:
        st.reliability_png(
            figures / "decider_reliability.png",
            {"as packaged": test, "temperature fitted on fit part": after},
            f"Decider, test part ({len(test)} cases)",
        )
    c = report["calibration"]
    lines = ["", "| test part | ECE as packaged | ECE, temperature fitted on fit |", "|---|---|---|"]
    lines += [f"| all ({len(test)}) | {c['ece_test_served']:.3f} | {c['ece_test_after']:.3f} |"]
    lines += [
        f"| {t} (T = {c['temperatures_T'][t]:.2f}) | {v[0]:.3f} | {v[1]:.3f} |"
        for t, v in c["ece_test_by_type"].items()
    ]
    lines += [
        "",
        f"yes/no lean, test part ({len(noul_test)} cases; intercept {b:+.2f} on the log-odds, fitted on fit):",
    ]
    lines += ["", "| | says yes | is yes | accuracy | ECE | log-loss |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {k} | {v['said_yes']:.0%} | {v['is_yes']:.0%} | {v['accuracy']:.1%} | {v['ece']:.3f} | "
        f"{v['log_loss']:.3f} |"
        for k, v in lean.items()
    ]
    lines += [
        "",
        f"ranking: P(yes) as packaged puts a yes case above a no case {ranking_auc:.0%} of the time (AUC; 50 % is "
        "no signal); no calibration changes that order",
    ]
    return lines + level_prior_lines(fit, test, report)


def level_prior_lines(fit: list[Prediction], test: list[Prediction], report: dict[str, Any]) -> list[str]:
    """The score questions' lean to levels: a log-bias per level (per number of levels) fitted on the fit part,
    measured on the test part; offline only (the adapter serves no level prior)."""
    rows: dict[str, Any] = {}
    for levels in sorted({len(p.probs) for p in test if p.type == "score"}):
        fitted = [p for p in fit if p.type == "score" and len(p.probs) == levels]
        tested = [p for p in test if p.type == "score" and len(p.probs) == levels]
        if not fitted:
            continue
        bias = st.fit_level_prior(fitted)
        after = [st.with_level_prior(p, bias) for p in tested]
        counts = [sum(p.expected_index == i for p in fitted) for i in range(levels)]
        majority = counts.index(max(counts))  # the level most common on fit: what a model with no signal would learn
        rows[str(levels)] = {
            "fit_cases": len(fitted),
            "test_cases": len(tested),
            "bias": bias,
            "majority_level_on_fit": majority,
            "majority_accuracy_on_test": sum(p.expected_index == majority for p in tested) / len(tested),
            **{
                name: {
                    "picks_level_0": sum(p.predicted_index == 0 for p in g) / len(g),
                    "is_level_0": sum(p.expected_index == 0 for p in g) / len(g),
                    "accuracy": metrics.accuracy(g),
                    "ece": metrics.ece(g),
                }
                for name, g in (("as packaged", tested), ("level prior fitted on fit", after))
            },
        }
    report["calibration"]["score_level_prior"] = rows
    lines = ["", "score lean, test part (a log-bias per level fitted on fit; offline, not served):"]
    lines += ["", "| levels | cases (fit, test) | bias per level | | picks level 0 | is level 0 | accuracy | ECE |"]
    lines += ["|---|---|---|---|---|---|---|---|"]
    for levels, row in rows.items():
        bias = " ".join(f"{b:+.2f}" for b in row["bias"])
        for name in ("as packaged", "level prior fitted on fit"):
            v = row[name]
            lines.append(
                f"| {levels} | {row['fit_cases']}, {row['test_cases']} | {bias} | {name} | {v['picks_level_0']:.0%} | "
                f"{v['is_level_0']:.0%} | {v['accuracy']:.1%} | {v['ece']:.3f} |"
            )
        lines.append(
            f"| {levels} | | | always level {row['majority_level_on_fit']} (the most common on fit) | | | "
            f"{row['majority_accuracy_on_test']:.1%} | |"
        )
    return lines


def policy_lines(
    policies: list[str], test: list[Prediction], cases: dict[str, dict[str, Any]], report: dict[str, Any]
) -> tuple[list[str], dict[str, tuple[float, float]]]:
    lines = [
        "",
        "| policy (certified on certify) | automate | review | abstain | automated errors on test | observed "
        "error (95 % upper bound) | review suggestions right | automated with an instruction planted (wrong) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    points = {}
    for spec in policies:
        label, _, path = spec.partition("=")
        manifest = read_manifest(Path(path))
        policy = manifest.policy
        if policy is None:
            lines.append(f"| {label} | (no policy in {path}) |")
            continue
        served = st.served_under(test, manifest)
        # the bound's level is the chance it may be wrong (upper_bound's `level`), 1 - the policy's confidence
        level = 1 - max((b.certificate.confidence for b in policy.types.values() if b.certificate), default=0.95)
        actions = st.policy_actions(policy, served, cases)
        s = st.action_summary(served, actions, level)
        planted = [p for p in served if actions[p.id] == "automate" and "planted_instruction" in cases[p.id]["tags"]]
        s["automated_planted"] = {"answers": len(planted), "wrong": sum(not p.correct for p in planted)}
        report.setdefault("policies", {})[label] = s
        err = "-" if s["observed_error"] is None else f"{s['observed_error']:.1%} ({s['error_upper_bound']:.1%})"
        lines.append(
            f"| {label} | {s['shares']['automate']:.1%} | {s['shares']['review']:.1%} | {s['shares']['abstain']:.1%} "
            f"| {s['errors']} of {s['automated']} | {err} | {s['review_suggestions_right']} of {s['reviewed']} "
            f"| {len(planted)} ({s['automated_planted']['wrong']}) |"
        )
        if s["automated"]:
            points[f"policy at {label}"] = (s["shares"]["automate"], s["observed_error"])
    return lines, points


def shift_lines(
    parts: dict[str, list[Prediction]], cases: dict[str, dict[str, Any]], report: dict[str, Any]
) -> list[str]:
    """The decision-shift alarm's option rule on real answers: the routing question's option mix on tickets without a
    planted instruction (the mix a policy certifies on) against the mix on tickets that carry one (traffic that
    shifted: someone found that the ticket's words steer the router). stacks/decision_shift.py breaches when an
    option's share moves more than option_band_points (20 in the stack tests' configuration)."""
    routing = [p for g in parts.values() for p in g if cases[p.id]["family"] == "ticket_routing"]
    clean = [p for p in routing if "planted_instruction" not in cases[p.id]["tags"]]
    planted = [p for p in routing if "planted_instruction" in cases[p.id]["tags"]]
    if not clean or not planted:
        return []
    options = clean[0].options

    def mix(group: list[Prediction]) -> dict[str, float]:
        return {o: sum(p.options[p.predicted_index] == o for p in group) / len(group) for o in options}

    before, after = mix(clean), mix(planted)
    moved = {o: 100 * (after[o] - before[o]) for o in options}
    worst = max(moved, key=lambda o: abs(moved[o]))
    report["decision_shift"] = {
        "clean": before,
        "planted": after,
        "moved_points": moved,
        "cases": [len(clean), len(planted)],
    }
    lines = [
        "",
        f"routing mix, tickets without / with a planted instruction ({len(clean)} / {len(planted)} answers):",
        "",
    ]
    lines += ["| option | " + " | ".join(options) + " |", "|---|" + "---|" * len(options)]
    lines += ["| without | " + " | ".join(f"{before[o]:.0%}" for o in options) + " |"]
    lines += ["| with | " + " | ".join(f"{after[o]:.0%}" for o in options) + " |"]
    lines += [
        "",
        f"largest move: {worst} {moved[worst]:+.0f} points; the options alarm at option_band_points 20 "
        + ("breaches" if abs(moved[worst]) > 20 else "stays inside"),
    ]
    return lines


def latency_lines(parts: dict[str, list[Prediction]], report: dict[str, Any], timed: list[str]) -> list[str]:
    first, rest = [], []
    for p in (p for name in timed for p in parts[name]):
        (first if p.id.endswith(("/route", "/approve", "/what", "/tool")) else rest).append(p.latency_s)
    every = first + rest
    if not every:
        return []
    q = statistics.quantiles(every, n=20)
    report["latency"] = {
        "cases": len(every),
        "p50_s": statistics.median(every),
        "p95_s": q[18],
        "mean_s": statistics.fmean(every),
        "first_question_of_state_p50_s": statistics.median(first) if first else None,
        "later_questions_p50_s": statistics.median(rest) if rest else None,
        "decisions_per_hour": 3600 / statistics.fmean(every),
    }
    r = report["latency"]
    return [
        "",
        f"latency per decision (one question a request, one at a time, {r['cases']} decisions of "
        f"{', '.join(timed)}): "
        f"p50 {r['p50_s']:.2f} s, p95 {r['p95_s']:.2f} s; first question on a state p50 "
        f"{r['first_question_of_state_p50_s']:.2f} s, the next ones on the same state p50 "
        f"{r['later_questions_p50_s']:.2f} s; {r['decisions_per_hour']:.0f} decisions an hour",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, default=ROOT / ".cache" / "decider-runs")
    ap.add_argument("--policy", action="append", default=[], metavar="LABEL=MANIFEST")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--shipped", type=Path, help="a manifest whose calibration the yes/no lean table also applies (the shipped one)"
    )
    ap.add_argument("--figures", type=Path)
    ap.add_argument(
        "--timed",
        default=",".join(PARTS),
        help="the parts whose latency_s to report, comma-separated (a part scored beside other work is left out)",
    )
    args = ap.parse_args(argv)
    cases = load_cases()
    parts = load_predictions(args.runs)
    report: dict[str, Any] = {"scored": {k: len(v) for k, v in parts.items()}}
    every = [p for g in parts.values() for p in g]
    lines = [f"scored: {report['scored']}"]
    lines += accuracy_tables(every, cases, report)
    shipped = read_manifest(args.shipped) if args.shipped else None
    lines += calibration_lines(parts, report, args.figures, shipped)
    plines, points = policy_lines(args.policy, parts["test"], cases, report)
    lines += plines
    lines += floor_lines(parts, cases, shipped, report)
    lines += shift_lines(parts, cases, report)
    lines += latency_lines(parts, report, args.timed.split(","))
    if args.figures and parts["test"]:
        curves = {"test part as packaged": parts["test"]}
        if shipped is not None:  # the question the policy automates, as the shipped calibration serves it
            refund = [p for p in parts["test"] if cases[p.id]["family"] == "refund_request"]
            curves["its refund questions, shipped calibration"] = st.served_under(refund, shipped)
        st.coverage_png(args.figures / "decider_coverage.png", curves, points)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
