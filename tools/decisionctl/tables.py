"""Every terminal table decisionctl prints: answers, evaluations, certification, bench runs, comparisons, outcomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from decision_spec.schemas import DecisionResponse

from decisionctl.readback import readback_of


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def answers(response: DecisionResponse) -> str:
    """One row per question: the chosen option, every probability (highest first), confidence, and where the
    server serves a threshold policy, the action it gives the answer and why."""
    rows = []
    for qid, a in response.answers.items():
        readback = readback_of(a.type)
        ordered = readback.labelled_probabilities(a)
        shown = "  ".join(f"{label} {v:.3f}" for label, v in ordered[:6])
        if len(ordered) > 6:
            shown += f"  (+{len(ordered) - 6} more)"
        rows.append([qid, a.type, readback.summary(a), shown, num(readback.contract_confidence(a))])
        if a.x_action is not None:
            rows[-1].append(f"{a.x_action} ({a.x_action_reason})")
    headers = ["question", "type", "answer", "probabilities", "confidence"]
    if any(a.x_action is not None for a in response.answers.values()):
        headers.append("action")
    return table(headers, rows)


def evaluation(results: Mapping[str, Any]) -> str:
    m = results["metrics"]
    scores = ("brier", "ece", "mean_confidence")
    rows = [
        [name, s["cases"], pct(s["accuracy"]), num(s.get("macro_f1")), *(num(s[k]) for k in scores)]
        for name, s in m.items()
    ]
    parts = [table(["", "cases", "accuracy", "macro-F1", "Brier", "ECE", "mean conf"], rows)]
    cov = results["coverage"]["overall"]
    parts.append("\nCoverage and accuracy when acting only at confidence >= threshold (all types):")
    parts.append(
        table(
            ["threshold", "covered", "coverage", "accuracy", "accuracy 95% low"],
            [
                [
                    f"{r['threshold']:.2f}",
                    r["covered"],
                    *(pct(r[k]) for k in ("coverage", "accuracy", "accuracy_lower95")),
                ]
                for r in cov
                if r["threshold"] >= 0.3 or r["threshold"] == 0
            ],
        )
    )
    parts.append("\nWhat the recommended thresholds do: share of cases per action (accuracy within it):")
    parts.append(actions(results["recommendation"]))
    parts.append("")
    for name, rec in results["recommendation"].items():
        parts.append(recommendation(name, rec))
    return "\n".join(parts)


def policy_actions(version: str, table_: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """What a written policy does to the evaluated cases, per type (policies.action_table)."""
    rows = [
        [qtype, *(f"{pct(row[a]['share'])} ({pct(row[a]['accuracy'])})" for a in ("automate", "review", "abstain"))]
        for qtype, row in table_.items()
    ]
    return f"policy {version}: share of cases per action (accuracy within it)\n" + table(
        ["", "automate", "review", "abstain"], rows
    )


def actions(recommendations: Mapping[str, Mapping[str, Any]]) -> str:
    """Per type: the share of cases automated, reviewed and abstained on, and how often each group was right."""
    rows = []
    for name, rec in recommendations.items():
        cells = []
        for action in ("automate", "review", "abstain"):
            group = rec[action] or {"coverage": 0.0, "accuracy": None}
            cells.append(f"{pct(group['coverage'])} ({pct(group['accuracy'])})")
        rows.append([name, *cells])
    return table(["", "automate", "review", "abstain"], rows)


def recommendation(name: str, rec: Mapping[str, Any]) -> str:
    target = rec["target_accuracy"]
    if rec["automate_at_or_above"] is None:
        head = (
            f"{name}: no threshold reaches {pct(target)} accuracy on at least {rec['min_support']} cases; "
            "automate nothing"
        )
    else:
        a = rec["automate"]
        head = (
            f"{name}: automate at confidence >= {rec['automate_at_or_above']:.2f} "
            f"({a['cases']} cases, {pct(a['coverage'])} coverage, {pct(a['accuracy'])} right, "
            f"95% lower bound {pct(a['accuracy_lower95'])})"
        )
    if rec["review_band"] is None:
        where = " below it" if rec["automate_at_or_above"] is not None else ""
        tail = (
            f"; no band of at least {rec['min_support']} cases{where} is right {pct(rec['review_accuracy'])} "
            "of the time: abstain on the rest"
        )
    else:
        lo, hi = rec["review_band"]
        review = rec["review"]
        tail = (
            f"; review [{lo:.2f}, {hi:.2f}) ({review['cases']} cases, {pct(review['accuracy'])} right)"
            f"; abstain below {lo:.2f} ({rec['abstain']['cases']} cases)"
        )
    return head + tail


_CALIBRATION_HEADERS = ["type", "fit", "held-out", "T in force", "T fitted"]
_CALIBRATION_HEADERS += ["ECE before", "ECE fitted", "NLL before", "NLL fitted", "applied"]


def calibration(fit: Mapping[str, Any]) -> str:
    rows = []
    for t, v in fit["per_type"].items():
        fitted = num(v["fitted_temperature"]) + (" (search bound)" if v["at_search_bound"] else "")
        verdict = "yes" if v["applied"] else "no: held-out ECE not lower"
        measured = ("heldout_ece_before", "heldout_ece_after", "heldout_nll_before", "heldout_nll_after")
        row = [t, v["fit_cases"], v["heldout_cases"], num(v["temperature_before"]), fitted]
        rows.append([*row, *(num(v[m]) for m in measured), verdict])
    out = [table(_CALIBRATION_HEADERS, rows)]
    if (pair := _intercept_line(fit["per_type"].get("noul") or {})) is not None:
        out.append(pair)
    if any(v["at_search_bound"] for v in fit["per_type"].values()):
        out.append("A fit at the search bound means the scores of that type carry little usable signal on these cases.")
    verdict = "calibration lowered it." if fit["improved"] else "calibration did NOT lower the held-out ECE."
    ece = f"{num(fit['heldout_ece_before'])} before, {num(fit['heldout_ece_after'])} after"
    out.append(f"Held-out ECE ({fit['heldout_cases']} cases): {ece}: {verdict}")
    return "\n".join(out)


def _intercept_line(fitted: Mapping[str, Any]) -> str | None:
    """A line under evaluate's calibration table: the yes/no pair fitted and whether it applied (None: not fitted)."""
    if "pair_applied" not in fitted:
        return None
    verdict = "applied" if fitted["pair_applied"] else "not applied: held-out log-loss not lower than without it"
    bound = " (search bound)" if fitted["pair_at_search_bound"] else ""
    return (
        f"noul temperature and intercept fitted together: T {fitted['pair_temperature']:.3f}, b "
        f"{fitted['pair_intercept']:.3f}{bound} (b in force {fitted['intercept_before']:.3f}); held-out log-loss "
        f"{num(fitted['heldout_nll_without_pair'])} without, {num(fitted['heldout_nll_pair'])} with (ECE "
        f"{num(fitted['heldout_ece_without_pair'])}, {num(fitted['heldout_ece_pair'])}): {verdict}"
    )


def bench(targets: Sequence[Mapping[str, Any]]) -> str:
    """One row per concurrency level, targets side by side under their labels (and instance types)."""
    headers: list[str] = ["concurrency"]
    groups: list[tuple[int, str]] = []  # (first column, title) of each target's columns
    for t in targets:
        has_cost = any(lv.get("cost_per_1000") is not None for lv in t["levels"])
        title = t["label"] + (f" ({t['instance_type']})" if t.get("instance_type") else "")
        groups.append((len(headers), title))
        headers += ["dec/s", "p50 s", "p95 s", "p99 s", "429", "sends/dec", "lost", "errors"]
        if has_cost:
            headers.append(f"{t.get('currency') or 'USD'}/1k")
    rows = []
    for c in sorted({lv["concurrency"] for t in targets for lv in t["levels"]}):
        row: list[Any] = [c]
        for t in targets:
            has_cost = any(x.get("cost_per_1000") is not None for x in t["levels"])
            lv = next((x for x in t["levels"] if x["concurrency"] == c), None)
            if lv is None:
                row += ["-"] * (9 if has_cost else 8)
                continue
            latency = [num(lv["latency_s"][p]) for p in ("p50", "p95", "p99")]
            row += [num(lv["throughput_per_s"], 2), *latency, pct(lv["rate_429"]), num(lv["sends_per_accepted"], 2)]
            row += [str(lv["lost"]), pct(lv["error_rate"])]
            if has_cost:
                row.append(num(lv.get("cost_per_1000"), 4))
        rows.append(row)
    body = table(headers, rows)
    widths = [len(cell) for cell in body.splitlines()[1].split("  ")]
    starts = [sum(widths[:i]) + 2 * i for i in range(len(widths))]
    title_line = ""
    for column, title in groups:
        title_line = title_line.ljust(starts[column]) + ("| " if title_line else "") + title
    return title_line + "\n" + body


def comparison(report: Mapping[str, Any]) -> str:
    """Baseline against candidate: accuracy, changed decisions, distribution shift, automated decisions."""
    sections = {"all types": report["overall"], **report["by_type"]}
    rows = []
    for name, s in sections.items():
        changed = f"{s['decisions_changed']} ({pct(s['decisions_changed_rate'])})"
        row = [name, s["cases"], pct(s["accuracy_base"]), pct(s["accuracy_new"]), changed]
        tv = [num(s["mean_total_variation"]), num(s["max_total_variation"])]
        rows.append([*row, f"+{s['fixed']} / -{s['broken']}", num(s["mcnemar_p"]), *tv])
    headers = ["", "cases", "acc base", "acc new", "changed", "fixed/broken", "McNemar p", "mean TV", "max TV"]
    parts = [table(headers, rows)]
    overall = report["overall"]
    if overall["content_changed"]:
        parts.append(f"{cases(overall['content_changed'])} changed content (wording) between the runs")
    for side in ("only_in_base", "only_in_new"):
        if report[side]:
            parts.append(f"{cases(len(report[side]))} {side.replace('_', ' ')} (not compared)")
    auto = overall.get("automate")
    if auto:
        parts.append(
            f"automate at confidence >= {auto['threshold']:.2f}: {cases(auto['base'])} before, {auto['new']} after "
            f"(+{auto['newly_automated']} / -{auto['no_longer_automated']}); "
            f"wrong among them: {auto['wrong_automated_base']} before, {auto['wrong_automated_new']} after"
        )
    changes = report["identity_changes"]
    if changes:
        parts.append("run identity changed: " + "; ".join(f"{k} {v['base']} -> {v['new']}" for k, v in changes.items()))
    else:
        parts.append("run identity: the same model, build, hardware, prompt template and calibration")
    if report["most_changed"]:
        parts.append("\nMost changed cases:")
        rows = []
        for c in report["most_changed"]:
            right = f"{'yes' if c['base_correct'] else 'no'} -> {'yes' if c['new_correct'] else 'no'}"
            moved = [f"{c['base_confidence']:.3f} -> {c['new_confidence']:.3f}", num(c["total_variation"]), right]
            rows.append([c["id"], c["type"], f"{c['base_choice']} -> {c['new_choice']}", *moved])
        parts.append(table(["id", "type", "decision", "confidence", "TV", "right"], rows))
    return "\n".join(parts)


def band_changes(changes: Mapping[str, Any]) -> str:
    """What changed between two runs' policies, a line per band that changed."""
    head = f"policy {changes['base_version']} -> {changes['new_version']}: "
    if not (changes["added"] or changes["removed"] or changes["changed"]):
        return head + f"the same {changes['unchanged']} bands"
    lines = [
        head + f"{len(changes['changed'])} bands changed, {len(changes['added'])} added, "
        f"{len(changes['removed'])} removed, {changes['unchanged']} unchanged"
    ]
    lines += [f"  added   {name}" for name in changes["added"]]
    lines += [f"  removed {name}" for name in changes["removed"]]
    for name, fields in changes["changed"].items():
        shown = "; ".join(f"{f} {_short(v['base'])} -> {_short(v['new'])}" for f, v in fields.items())
        lines.append(f"  changed {name}: {shown}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str) and len(value) == 64:  # a label set's sha256
        return value[:12]
    return "none" if value is None else str(value)


def question_name(key: str, entry: Mapping[str, Any]) -> str:
    return f"{entry['type']} {key} ({entry['first_case']})"


_CERTIFIED_HEADERS = ["band", "cases", "automate >=", "automated", "error (wrong/automated)", "bound", "review"]
_CERTIFIED_HEADERS.append("abstain")


def _band_row(name: str, band: Mapping[str, Any]) -> list[str]:
    auto, review = band["automate"], band["review"]
    return [
        name,
        str(band["cases"]),
        "-" if band.get("automate_at_or_above") is None else f"{band['automate_at_or_above']:.3f}",
        pct(auto["share"]) if auto else "0.0%",
        f"{pct(auto['error'])} ({auto['errors']}/{auto['cases']})" if auto else "-",
        pct(auto["bound"]) if auto else "-",
        pct(review["share"]) if review else "0.0%",
        pct(band["abstain"]["share"]),
    ]


def certification(rep: Mapping[str, Any]) -> str:
    """The certified shares, per question, per type (the band for questions the cases never asked), overall;
    and for each band that certified nothing, why and how many cases would."""
    e, c = rep["max_error"], rep["confidence"]
    head = (
        f"Certified for automation at error <= {pct(e)} with probability {pct(c)} out of sample "
        f"({rep['method']}; review: suggestions right >= {pct(rep['review_accuracy'])}, same probability):"
    )
    rows = [_band_row(question_name(k, q), q) for k, q in rep["questions"].items()]
    rows += [_band_row(f"{t} (type band)", b) for t, b in rep["types"].items()]
    rows.append(_band_row("overall", {**rep["overall"], "automate_at_or_above": None}))
    named = [(question_name(k, q), q) for k, q in rep["questions"].items()]
    named += [(f"{t} (type band)", b) for t, b in rep["types"].items()]
    notes = [no_band_note(n, b, e, rep["min_support"]) for n, b in named if b["automate"] is None]
    overall_ = rep["overall"]
    auto = overall_["automate"]
    summary = (
        f"overall: {pct(auto['share'] if auto else 0.0)} of {overall_['cases']} cases certified for automation at "
        f"<= {pct(e)} error ({overall_['bands_automating']} of {overall_['bands']} bands automate)"
    )
    return "\n".join([head, table(_CERTIFIED_HEADERS, rows), summary, *notes])


def no_band_note(name: str, band: Mapping[str, Any], max_error: float, min_support: int) -> str:
    """Why a band automates nothing, and how many cases like these would certify one."""
    need = band["cases_needed"]
    if need["at_best"] is not None:
        best = need["at_best"]
        return (
            f"{name}: no automate band; at the error measured at confidence >= {best['threshold']:.3f} "
            f"({pct(best['error'])}), about {best['cases']} cases would certify one (it has {band['cases']})"
        )
    lowest = need["lowest_error_measured"]
    seen = f"its lowest measured error, {pct(lowest)}, is not below E = {pct(max_error)}"
    if lowest is None:
        seen = f"it has fewer than --min-support {min_support} cases to measure an error on"
    return (
        f"{name}: no automate band; no number of cases like these would certify one ({seen}); "
        f"even error-free, a band needs {need['without_errors']} automated cases"
    )


def shadow_comparison(report: dict[str, Any]) -> str:
    """Production against shadow on the same invocations: agreement, shift and automated share per question."""
    p, s = report["production"]["variant"], report["shadow"]["variant"]
    rows = []
    for qid, q in report["questions"].items():
        shares = q["action_share"]
        automated = f"{pct(shares['production'].get('automate'))} -> {pct(shares['shadow'].get('automate'))}"
        mix = q["option_mix"]
        moved = max(
            (abs(mix["shadow"].get(o, 0.0) - mix["production"].get(o, 0.0)), o)
            for o in set(mix["production"]) | set(mix["shadow"])
        )
        measured = [pct(q["agreement"]), num(q["mean_total_variation"]), f"{moved[1]} {pct(moved[0])}", automated]
        rows.append([qid, q["type"], q["pairs"], *measured])
    parts = [
        f"{report['paired']} invocations answered by both {p} (production) and {s} (shadow); unpaired: "
        f"{report['unpaired']['production']} production, {report['unpaired']['shadow']} shadow",
        table(["question", "type", "pairs", "agree", "mean TV", "most moved option", "automated"], rows),
        f"{report['disagreed']} of {report['compared_answers']} answers disagree ({pct(report['disagreement_rate'])})",
    ]
    for d in report["top"]:
        tv = num(d["total_variation"])
        parts.append(f"  {d['key']} {d['question_id']}: {d['production']} -> {d['shadow']} (TV {tv})")
    changed = [f for f, v in report["identity"]["production"].items() if v != report["identity"]["shadow"].get(f)]
    parts.append("identity differs in: " + (", ".join(changed) if changed else "nothing (same run identity)"))
    return "\n".join(parts)


def outcomes(report: dict[str, Any]) -> str:
    """Captured answers joined with final answers: reversal rates per question, and each band's error on traffic."""
    rows = []
    for qid, q in report["questions"].items():
        review = q["actions"].get("review", {"answers": 0, "changed": 0})
        reversals = [q["automated"], q["reversed"], pct(q["reversal_rate"]), f"{review['changed']}/{review['answers']}"]
        rows.append([qid, q["type"], q["joined"], pct(q["agreed"] / q["joined"]), *reversals])
    headers = ["question", "type", "joined", "agreed", "automated", "reversed", "reversal rate", "review changed"]
    parts = [
        f"{report['joined']} decisions joined from {report['capture']['answers']} captured answers and "
        f"{report['outcome_rows']} outcome rows",
        table(headers, rows),
    ]
    bands = report.get("bands")
    if bands:
        parts.append(f"\nAutomate bands of policy {bands['policy']} on this traffic:")
        band_rows = []
        for key, b in bands["bands"].items():
            promise = b["promised"]
            verdict = "no bound recorded"
            if promise is not None:
                verdict = f"<= {pct(promise['max_error'])}: " + ("EXCEEDED" if b["exceeded"] else "consistent")
                verdict += f" (p {num(b['p_value'])})"
            band_rows.append([key, ", ".join(b["question_ids"]), b["automated"], b["errors"], pct(b["error"]), verdict])
        parts.append(table(["band", "questions", "automated", "reversed", "error", "promised"], band_rows))
    return "\n".join(parts)


def costs(rows: Sequence[Any], currency: str) -> str:
    """Each section's hosting modes (load/costs.py's Row.cells): monthly cost, break-even traffic, the mode's terms."""
    headers = ["section", "mode", "runs on", f"{currency}/month", "break-even a day: this shape / even", "note"]
    return table(headers, [r.cells() for r in rows])
