"""The decision diff and the deployed-variant check as Markdown: for a pull request comment or a job summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from decision_spec.answer_settings import shown

MAX_LISTED = 50  # flips and action changes listed by id; the JSON report holds them all


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100.0 * value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _short(sha: str | None) -> str:
    return "none" if not sha else sha[:12]


def _probs(probs: Mapping[str, float]) -> str:
    return ", ".join(f"{o} {p:.3f}" for o, p in probs.items())


def decision_diff(report: Mapping[str, Any], failed: Sequence[str], *, title: str) -> str:
    """The diff of two records, gates first."""
    base, new = report["base"], report["new"]
    lines = [f"## {title}", ""]
    if failed:
        lines += ["**Gates failed:**", "", *(f"- {f}" for f in failed), ""]
    else:
        lines += ["All gates pass.", ""]
    lines += [
        "| | base | new |",
        "|---|---|---|",
        f"| model sha256 | `{_short(base['artifact']['model_sha256'])}` | "
        f"`{_short(new['artifact']['model_sha256'])}` |",
        f"| manifest sha256 | `{_short(base['artifact']['manifest_sha256'])}` | "
        f"`{_short(new['artifact']['manifest_sha256'])}` |",
        f"| policy | {base['artifact']['policy_version'] or 'none'} | {new['artifact']['policy_version'] or 'none'} |",
        f"| suite sha256 | `{_short(base['suite']['sha256'])}` | `{_short(new['suite']['sha256'])}` |",
    ]
    before, after = report["metrics"]["base"]["overall"], report["metrics"]["new"]["overall"]
    lines += [
        f"| accuracy | {_pct(before['accuracy'])} | {_pct(after['accuracy'])} |",
        f"| ECE | {_num(before['ece'])} | {_num(after['ece'])} |",
        f"| Brier | {_num(before['brier'])} | {_num(after['brier'])} |",
        "",
        f"{report['cases']} cases compared; {len(report['flips'])} answers flipped; largest change in one option's "
        f"probability {_num(report['max_probability_delta'])}; {len(report['content_changed'])} cases reworded in "
        f"the suite; {len(report['only_in_base'])} only in base, {len(report['only_in_new'])} only in new.",
        "",
    ]
    if report["run_changes"]:
        lines += ["Run identity changes: " + ", ".join(f"`{k}`" for k in report["run_changes"]), ""]
    changed = report.get("answer_settings_changes") or {}
    if changed:
        moved = (f"`{k}` {_setting(v['base'])} to {_setting(v['new'])}" for k, v in changed.items())
        lines += ["Answer settings changed: " + ", ".join(moved), ""]
    lines += _flips(report["flips"])
    lines += _actions(report)
    lines += _bands(report["bands"])
    return "\n".join(lines) + "\n"


def _flips(flips: Sequence[Mapping[str, Any]]) -> list[str]:
    if not flips:
        return []
    lines = ["### Flips", "", "| case | expected | base | new | reworded |", "|---|---|---|---|---|"]
    for f in flips[:MAX_LISTED]:
        mark = {True: "right", False: "wrong"}
        lines.append(
            f"| `{f['id']}` | {f['expected']} | {f['base']['picked']} ({mark[f['base']['correct']]}; "
            f"{_probs(f['base']['probs'])}) | {f['new']['picked']} ({mark[f['new']['correct']]}; "
            f"{_probs(f['new']['probs'])}) | {'yes' if f['content_changed'] else ''} |"
        )
    if len(flips) > MAX_LISTED:
        lines.append(f"| ... {len(flips) - MAX_LISTED} more in the JSON report | | | | |")
    return [*lines, ""]


def _actions(report: Mapping[str, Any]) -> list[str]:
    shares = report["actions"]
    if shares["base"] is None and shares["new"] is None:
        return []
    names = sorted((shares["base"] or {}).keys() | (shares["new"] or {}).keys())
    lines = ["### Actions", "", "| action | base | new |", "|---|---|---|"]
    for a in names:
        lines.append(f"| {a} | {_pct((shares['base'] or {}).get(a))} | {_pct((shares['new'] or {}).get(a))} |")
    changed = report["action_changes"]
    if changed:
        listed = ", ".join(f"`{c['id']}` {c['base']} to {c['new']}" for c in changed[:MAX_LISTED])
        lines += ["", f"{len(changed)} cases change action: {listed}"]
    return [*lines, ""]


def _bands(bands: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if not bands:
        return []
    lines = [
        "### Bands (measured on the suite)",
        "",
        "| band | E | automated share (base, new) | errors / automated (base, new) | bound (base, new) |",
        "|---|---|---|---|---|",
    ]
    for name, row in bands.items():
        e = row["max_error"]["new"] if row["max_error"]["new"] is not None else row["max_error"]["base"]
        lines.append(
            f"| {name} | {_num(e, 3)} | {_pct(row['automated_share']['base'])}, {_pct(row['automated_share']['new'])}"
            f" | {row['errors']['base']}/{row['automated']['base']}, {row['errors']['new']}/{row['automated']['new']}"
            f" | {_num(row['bound']['base'])}, {_num(row['bound']['new'])} |"
        )
    return [*lines, ""]


def new_record(record: Mapping[str, Any], *, title: str, base: str) -> str:
    """A record with nothing to compare against (the first one for an environment)."""
    overall = record["metrics"]["overall"]
    return (
        f"## {title}\n\nNo record at `{base}` to compare with: this is the first evaluation of the suite "
        f"`{record['suite']['path']}`. Model `{_short(record['artifact']['model_sha256'])}`, "
        f"{overall['cases']} cases, accuracy {_pct(overall['accuracy'])}, ECE {_num(overall['ece'])}, "
        f"Brier {_num(overall['brier'])}.\n"
    )


def deployed_check(report: Mapping[str, Any], *, title: str) -> str:
    """The deployed-variant check: one row per variant, then each failing variant's failures."""
    artifact, tolerance = report["record"]["artifact"], report["tolerance"]
    lines = [f"## {title}", ""]
    lines.append("Every variant passes." if report["passed"] else "**Failed:** not every variant answers as recorded.")
    lines += [
        "",
        f"Record `{report['record']['path']}` (sha256 `{_short(report['record']['sha256'])}`): model "
        f"`{_short(artifact['model_sha256'])}`, manifest `{_short(artifact['manifest_sha256'])}`, policy "
        f"{artifact['policy_version'] or 'none'}. Tolerance: {tolerance['probability']:g} in any option's "
        f"probability, at most {tolerance['flips']} flipped answers.",
        "",
        "| endpoint | variant | result | cases | max delta | flips | instance types | hardware | llama.cpp build "
        "| GPU layers | adapter |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for endpoint in report["endpoints"]:
        name = endpoint["endpoint"]
        if endpoint["failures"] and not endpoint["variants"]:
            lines.append(f"| `{name}` | | failed ({endpoint['status'] or 'not described'}) | | | | | | | | |")
        notes += [f"- `{name}`: {f}" for f in endpoint["failures"]]
        for v in endpoint["variants"]:
            lines.append(
                f"| `{name}` | {v['variant']} | {'pass' if v['passed'] else '**fail**'} | {v.get('cases', 0)} | "
                f"{_num(v.get('max_delta'), 4)} | {len(v.get('flips', []))} | {v.get('instance_types') or ''} | "
                f"{_hardware(v.get('hardware'))} | {v.get('llama_cpp_build') or ''} | {_opt(v.get('n_gpu_layers'))} | "
                f"{v.get('adapter') or ''} |"
            )
            notes += [f"- `{name}` / {v['variant']}: {f}" for f in v["failures"]]
            notes += _pool(name, v)
            notes += _flipped(name, v)
            if v.get("run_changes"):
                changed = ", ".join(f"`{k}`" for k in v["run_changes"])
                notes.append(
                    f"- `{name}` / {v['variant']}: run identity differs from the record's in {changed} (noted)"
                )
        notes += [f"- `{name}` / {n['variant']}: not checked, {n['why']}" for n in endpoint.get("not_checked", [])]
    lines.append("")
    if notes:
        lines += ["### Notes", "", *notes, ""]
    return "\n".join(lines) + "\n"


def _pool(endpoint: str, variant: Mapping[str, Any]) -> list[str]:
    """A variant whose cases were answered by more than one kind of hardware (an instance pool), kind by kind."""
    seen = variant.get("hardware_seen") or []
    if len(seen) < 2:
        return []
    kinds = "; ".join(f"{_hardware(k['hardware'])} ({_threads(k['hardware'])}): {k['cases']} cases" for k in seen)
    return [f"- `{endpoint}` / {variant['variant']}: answered by {len(seen)} kinds of instance: {kinds}"]


def _threads(hardware: Mapping[str, Any]) -> str:
    return f"{hardware.get('threads')} threads, {hardware.get('logical_cpus')} CPUs"


def _hardware(hardware: Mapping[str, Any] | None) -> str:
    if not hardware:
        return ""
    gpus = hardware.get("gpus") or []
    if gpus:
        return ", ".join(str(g.get("name") if isinstance(g, Mapping) else g) for g in gpus)
    return str(hardware.get("cpu") or "")


def _setting(value: Any) -> str:
    return "not recorded" if value is None else shown(value)


def _opt(value: Any) -> str:
    return "" if value is None else str(value)


def _flipped(endpoint: str, variant: Mapping[str, Any]) -> list[str]:
    flips = variant.get("flips") or []
    return [
        f"- `{endpoint}` / {variant['variant']}: `{f['id']}` flipped: record {f['base']['picked']} "
        f"({_probs(f['base']['probs'])}), variant {f['new']['picked']} ({_probs(f['new']['probs'])})"
        for f in flips[:MAX_LISTED]
    ]
