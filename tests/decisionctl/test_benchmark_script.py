"""The benchmark script runs: its new-question section on the real model, once per comparison. The section
itself asserts that the new question was served from the cache and the third from the resident state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.model
@pytest.mark.slow
def test_new_question_section_measures_cache_hits_cheaper_than_first_requests(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "adapter_bench.py"), "--only", "new_question", "--repeat", "1"]
    proc = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["new_question_on_seen_state"]
    assert set(rows) == {"noul", "score", "choice", "choice_debias_off"}
    for name, row in rows.items():
        # the restored state is not read again (the token counts say so exactly), and that shows in the time
        assert 0 < row["token_share"] < 0.25 and row["ratio_cache"] < 0.5, (name, row)
    assert rows["choice"]["token_share"] > rows["choice_debias_off"]["token_share"]  # the second order is read
