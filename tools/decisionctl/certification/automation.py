"""The automation figures of a certified run: automated share against error, bound and threshold, per band."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from decisionctl import plots, tables

AUTOMATION_DIR = "automation"  # one figure per band: automated share against error, bound and threshold


def write_automation_plots(out: Path, certification: Mapping[str, Any]) -> list[Path]:
    """OUT/automation/<band>.png for every question and type band: automated share against error."""
    folder = out / AUTOMATION_DIR
    folder.mkdir(parents=True, exist_ok=True)
    e, c = certification["max_error"], certification["confidence"]
    figures = {
        **{f"{q['type']}-{key}": (tables.question_name(key, q), q) for key, q in certification["questions"].items()},
        **{f"type-{t}": (f"{t} (type band)", b) for t, b in certification["types"].items()},
    }
    written = []
    for stem, (name, band) in figures.items():
        path = folder / f"{stem}.png"
        plots.automation_curve(path, band, title=f"{name}: {band['cases']} cases", max_error=e, confidence=c)
        written.append(path)
    return written
