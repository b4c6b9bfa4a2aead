"""PNG figures: reliability diagram, confidence histogram, latency versus concurrency, certified automation, cost of
each hosting mode against traffic (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt
from decision_spec import contract

# Series per question type in contract order; a type past the palette takes matplotlib's cycle (reliability_diagram).
_TYPE_PALETTE = (("tab:blue", "o"), ("tab:orange", "s"), ("tab:green", "^"))
_TYPE_STYLE = {"all types": ("black", "D"), **dict(zip(contract.QUESTION_TYPES, _TYPE_PALETTE, strict=False))}


@dataclass(frozen=True)
class Reliability:
    """One series of a reliability diagram: its cases, their ECE, and per equal-width confidence bin (empty ones
    included) its lower edge, cases, accuracy and mean confidence."""

    cases: int
    ece: float | None
    lower: Sequence[float]
    count: Sequence[int]
    accuracy: Sequence[float | None]
    mean_confidence: Sequence[float | None]


@dataclass(frozen=True)
class _Bin:
    lower: float
    count: int
    accuracy: float | None
    mean_confidence: float | None


def reliability_diagram(
    path: Path, series: Mapping[str, Reliability], *, title: str, threshold: float | None = None
) -> None:
    """Accuracy against confidence per bin: the first series as bars, others as lines; the diagonal is perfect."""
    fig, (ax, ax_n) = plt.subplots(2, 1, figsize=(6.4, 7.2), height_ratios=(3, 1), sharex=True)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    n_bins = len(next(iter(series.values())).lower) if series else 1
    width = 1 / n_bins / (len(series) + 1)
    for k, (label, reliability) in enumerate(series.items()):
        color, marker = _TYPE_STYLE.get(label, (f"C{k}", "o"))
        all_bins = [
            _Bin(*b)
            for b in zip(
                reliability.lower, reliability.count, reliability.accuracy, reliability.mean_confidence, strict=True
            )
        ]
        bins = [b for b in all_bins if b.count]
        ece = reliability.ece
        name = f"{label} (n={reliability.cases}, ECE={ece:.3f})" if ece is not None else label
        if k == 0:
            ax.bar(
                [b.lower for b in bins],
                [b.accuracy or 0.0 for b in bins],
                width=1 / n_bins,
                align="edge",
                color=color,
                alpha=0.25,
                edgecolor=color,
                label=f"{name}: accuracy per bin",
            )
            ax.plot([b.mean_confidence for b in bins], [b.accuracy for b in bins], marker=marker, color=color)
        else:
            ax.plot(
                [b.mean_confidence for b in bins],
                [b.accuracy for b in bins],
                marker=marker,
                color=color,
                linewidth=1,
                alpha=0.8,
                label=name,
            )
        ax_n.bar(
            [b.lower + width * (k + 0.5) for b in all_bins],
            [b.count for b in all_bins],
            width=width,
            color=color,
            align="edge",
            label=label,
        )
    if threshold is not None:
        for a in (ax, ax_n):
            a.axvline(threshold, color="black", linewidth=1, linestyle=":")
        ax.text(threshold, 0.02, f" automate >= {threshold:.2f}", fontsize=8)
    ax.set(xlim=(0, 1), ylim=(0, 1.02), ylabel="observed accuracy", title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax_n.set(xlabel="confidence (probability of the predicted option), 10 bins", ylabel="cases")
    ax_n.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def confidence_histogram(
    path: Path,
    right: Sequence[float],
    wrong: Sequence[float],
    *,
    title: str,
    threshold: float | None = None,
    review_band: Sequence[float] | None = None,
) -> None:
    """How many right and wrong answers (their confidences) sit at each confidence, with the automate / review lines."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    edges = [i / 20 for i in range(21)]
    ax.hist(
        [list(right), list(wrong)],
        bins=edges,
        stacked=True,
        color=["tab:green", "tab:red"],
        label=["right", "wrong"],
        zorder=2,
    )
    if review_band is not None:
        ax.axvspan(review_band[0], review_band[1], color="gold", alpha=0.25, zorder=0, label="review band")
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle=":", label=f"automate >= {threshold:.2f}")
    ax.set(xlim=(0, 1), xlabel="confidence (probability of the predicted option)", ylabel="cases", title=title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _nan(x: float | None) -> float:
    return float("nan") if x is None else x


def latency_plot(path: Path, targets: Mapping[str, Sequence[Mapping[str, Any]]], *, title: str) -> None:
    """p95 latency (a band from p50 to p99 around it) and throughput against concurrency, a colour per series
    and one legend under both panels; latency on a log scale when the series span more than 20x."""
    fig, (ax_lat, ax_tp) = plt.subplots(1, 2, figsize=(10, 4.2 + 0.18 * len(targets)))
    for k, (label, levels) in enumerate(targets.items()):
        conc = [lv["concurrency"] for lv in levels]
        quantiles = {q: [_nan(lv["latency_s"][q]) for lv in levels] for q in ("p50", "p95", "p99")}
        ax_lat.fill_between(conc, quantiles["p50"], quantiles["p99"], color=f"C{k}", alpha=0.12, linewidth=0)
        ax_lat.plot(conc, quantiles["p95"], marker="o", color=f"C{k}", label=label)
        ax_tp.plot(conc, [lv["throughput_per_s"] for lv in levels], marker="o", color=f"C{k}")
        rejected = [(lv["concurrency"], lv["rate_429"]) for lv in levels if lv["rate_429"] > 0]
        for c, rate in rejected:
            ax_tp.annotate(
                f"{rate:.0%} 429",
                (c, 0),
                textcoords="offset points",
                xytext=(0, 4 + 10 * k),
                fontsize=7,
                color=f"C{k}",
                ha="center",
            )
    ticks = sorted({lv["concurrency"] for levels in targets.values() for lv in levels})
    for ax in (ax_lat, ax_tp):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(c) for c in ticks])
        ax.minorticks_off()
        ax.set_xlabel("concurrent clients")
        ax.grid(alpha=0.3)
    ax_lat.set(ylabel="p95 latency of accepted decisions (s); band: p50 to p99", title=title)
    seen = [lv["latency_s"][q] for levels in targets.values() for lv in levels for q in ("p50", "p99")]
    seen = [v for v in seen if v]
    if seen and min(seen) > 0 and max(seen) / min(seen) > 20:
        ax_lat.set_yscale("log")
    else:
        ax_lat.set_ylim(bottom=0)
    ax_tp.set(ylabel="decisions per second", title="throughput (429 rate among sends annotated)")
    ax_tp.set_ylim(bottom=0)
    columns = 2 if len(targets) > 3 else len(targets) or 1
    fig.legend(loc="lower center", ncol=columns, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * ((len(targets) + columns - 1) // columns), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# comparison categories: (colour, marker, legend label)
COMPARISON_STYLE = {
    "same": ("tab:grey", "o", "same decision"),
    "fixed": ("tab:green", "^", "changed: now right"),
    "broken": ("tab:red", "v", "changed: now wrong"),
    "other": ("tab:orange", "s", "changed: wrong in both"),
}


def comparison_scatter(
    path: Path, points: Sequence[tuple[float, float, str]], *, title: str, threshold: float | None = None
) -> None:
    """Per case: the baseline's probability for its own decision (x) against the candidate's probability for
    that same option (y), coloured by what happened to the decision. On the diagonal nothing moved."""
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="unchanged")
    for category, (color, marker, label) in COMPARISON_STYLE.items():
        xs = [x for x, _, c in points if c == category]
        ys = [y for _, y, c in points if c == category]
        if xs:
            ax.scatter(xs, ys, color=color, marker=marker, s=22, alpha=0.8, label=f"{label} ({len(xs)})", zorder=3)
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle=":", linewidth=1)
        ax.axhline(threshold, color="black", linestyle=":", linewidth=1, label=f"automate >= {threshold:.2f}")
    ax.set(
        xlim=(0, 1.02),
        ylim=(0, 1.02),
        xlabel="baseline: probability of its decision",
        ylabel="candidate: probability of that same option",
        title=title,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def automation_curve(path: Path, band: Mapping[str, Any], *, title: str, max_error: float, confidence: float) -> None:
    """One band (bands.certify_group): at each grid threshold, the share of its cases automated (x) against
    the error among them (y), measured and its exact upper bound; E and the certified threshold marked."""
    rows = [r for r in band["grid"] if r["cases"]]
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    shares = [r["share"] for r in rows]
    ax.plot(shares, [r["error"] for r in rows], marker="o", color="tab:blue", label="measured error")
    ax.plot(
        shares,
        [r["bound"] for r in rows],
        marker="v",
        color="tab:red",
        linestyle="--",
        label=f"upper bound at its test level (C = {confidence:.0%} overall)",
    )
    ax.axhline(max_error, color="black", linewidth=1, linestyle=":", label=f"E = {max_error:.1%}")
    last = -1.0
    for r in sorted(rows, key=lambda r: r["share"]):  # label thresholds where they do not overlap
        if r["share"] - last >= 0.05:
            ax.annotate(
                f"{r['threshold']:g}", (r["share"], r["error"]), textcoords="offset points", xytext=(2, -10), fontsize=7
            )
            last = r["share"]
    chosen = band["automate"]
    if chosen is not None:
        t = band["automate_at_or_above"]
        ax.scatter([chosen["share"]], [chosen["bound"]], s=160, marker="*", color="gold", edgecolor="black", zorder=4)
        ax.axvline(
            chosen["share"],
            color="tab:green",
            linewidth=1.2,
            label=f"certified: automate >= {t:g}, {chosen['share']:.0%} of cases, bound {chosen['bound']:.1%}",
        )
    else:
        ax.text(0.02, 0.95, "no threshold certified: automate nothing", transform=ax.transAxes, fontsize=9, va="top")
    top = max([4 * max_error, *(1.15 * r["error"] for r in rows)])  # bounds on a handful of cases run off the top
    ax.set(
        xlim=(0, 1.02),
        ylim=(0, min(1.0, top)),
        xlabel="share of the band's cases automated (threshold annotated)",
        ylabel="error among the automated cases",
        title=title,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cost_plot(
    path: Path,
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    *,
    at: float,
    currency: str,
    title: str,
) -> None:
    """Monthly cost of each hosting mode against decisions a day (log-log), a panel per section; a dotted line at the
    profile's own traffic (`at`). Where two curves cross is a break-even."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (section, modes) in zip(axes[0], panels.items(), strict=True):
        for k, (mode, points) in enumerate(modes.items()):
            ax.plot([d for d, _ in points], [max(c, 1e-3) for _, c in points], color=f"C{k}", label=mode)
        ax.axvline(at, color="black", linestyle=":", linewidth=1, label="this profile")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set(xlabel="decisions a day (the profile's shape, scaled)", ylabel=f"{currency} a month", title=section)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
