"""benchmarks/cold_start.py runs: one start of each packaged model to its first answered decision (BENCHMARKS.md's
cold start rows come from it), its numbers in order: /ping before the first decision, memory above the GGUF."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.model
def test_one_cold_start_per_model_to_its_first_decision(tmp_path: Path) -> None:
    require_model()
    out = tmp_path / "cold_start.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "cold_start.py"), "--runs", "1", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    models = json.loads(out.read_text())["models"]
    assert "smollm2-135m-q4_1" in models
    for name, result in models.items():
        (run,) = result["runs"]
        assert 0 < run["ping_s"] < run["first_decision_s"] < 120, (name, run)
        assert run["peak_rss_mb"] > run["gguf_mb"], (name, run)
