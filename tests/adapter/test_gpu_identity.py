"""The GPUs a run identity reports (identity.gpus, through identity.nvidia_smi), read from nvidia-smi's CSV. No GPU
runs here: the nvidia-smi on the PATH is a stand-in script that prints what the real one printed on an H200
(`--query-gpu=name,memory.total --format=csv,noheader`), fails, or is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from decision_adapter import identity


def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_each_gpu_is_read_from_its_csv_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(tmp_path, monkeypatch, "printf 'NVIDIA H200, 143771 MiB\\nNVIDIA H200, 143771 MiB\\n'")
    assert [(g.name, g.memory) for g in identity.gpus()] == [("NVIDIA H200", "143771 MiB")] * 2


def test_no_gpu_where_nvidia_smi_fails_or_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    assert identity.gpus() == []
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert identity.gpus() == []
