"""The decision diff and the deployed-variant check as Markdown: for a pull request comment or a job summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
