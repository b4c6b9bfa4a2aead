"""The footprint from the file (issue 46): package-model reads the GGUF's size and KV bytes per token into the manifest
and prints them, record-evaluation carries them into the record, and synth sizes memory from the evaluated manifest,
refusing a cdk.json footprint of another model and an instance type that cannot hold the model, with the numbers."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.launcher import DECIDER_DIR, MODEL_DIR, MODEL_FILE, MODEL_SHA256
from decision_spec.environment_config import ConfigError
from decision_spec.gguf_metadata import ModelMetadata
from decision_spec.manifest import read_manifest
from decision_spec.memory import RUNTIME_OVERHEAD_MB, STATE_CACHE_CAP_BYTES, STATE_CACHE_CONTEXTS, memory_needed_mb
from decisionctl.commands import cli

from app import build_app
from stacks.instance_memory import HOST_RESERVED_MB, INSTANCE_MEMORY, smallest_fitting
from stacks.model_fit import FootprintContradicted, InstanceTooSmall
from tests.cdk_support import PROD_FOOTPRINT, ROOT

SUITE = "evaluation/support-suite.jsonl"
DECIDER = DECIDER_DIR / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"  # issue 44's model, where `./dev decider` puts it


def package(gguf: Path, sha256: str, out: Path) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        status = cli.main(
            ["package-model", str(gguf), "--expected-sha256", sha256, "--source", "t", "--license", "t", "--out",
             str(out)]
        )  # fmt: skip
    return status, printed.getvalue()


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("packaged") / "smollm2"
    status, printed = package(MODEL_DIR / MODEL_FILE, MODEL_SHA256, out)
    assert status == 0, printed
    return out, printed


def llama_cpp_kv_bytes(gguf: Path) -> int:
    """What the adapter sizes its cache from: the metadata llama.cpp itself reads (not the gguf package)."""
    from llama_cpp import Llama

    vocab = Llama(str(gguf), vocab_only=True, verbose=False)
    try:
        return ModelMetadata.read(dict(vocab.metadata)).kv_bytes_per_token()
    finally:
        vocab.close()


def test_package_model_writes_and_prints_the_footprint_llama_cpp_reads(packaged: tuple[Path, str]) -> None:
    out, printed = packaged
    manifest = read_manifest(out / "manifest.json")
    assert manifest.size_bytes == (MODEL_DIR / MODEL_FILE).stat().st_size
    assert manifest.kv_bytes_per_token == llama_cpp_kv_bytes(MODEL_DIR / MODEL_FILE)
    # SmolLM2-135M: 30 layers, 3 KV heads of 64 (576 / 9 heads), K and V in f16
    assert manifest.kv_bytes_per_token == 30 * 3 * (64 + 64) * 2
    assert f"gguf_bytes {manifest.size_bytes}, kv_bytes_per_token {manifest.kv_bytes_per_token} " in printed


@pytest.mark.skipif(not DECIDER.is_file(), reason="issue 44's decider GGUF is not on this machine")
def test_a_qwen2_gguf_reads_its_key_and_value_lengths() -> None:
    from decisionctl.release.footprint import read_footprint

    footprint = read_footprint(DECIDER)
    assert (footprint.block_count, footprint.head_count_kv, footprint.key_length) == (28, 2, 128)
    assert footprint.kv_bytes_per_token == llama_cpp_kv_bytes(DECIDER) == 28 * 2 * 256 * 2


def repository(tmp: Path, manifest_path: Path) -> tuple[Path, dict[str, Any]]:
    """A copy of cdk.json's context and the suite, and dev's record as record-evaluation writes it for the packaged
    manifest: the committed record's answers, the manifest's footprint in its artifact block."""
    root = tmp / "repo"
    (root / "evaluation").mkdir(parents=True)
    (root / SUITE).write_bytes((ROOT / SUITE).read_bytes())
    context = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    manifest = read_manifest(manifest_path)
    record = json.loads((ROOT / "evaluation" / "dev.json").read_text(encoding="utf-8"))
    footprint = {"gguf_bytes": manifest.size_bytes, "kv_bytes_per_token": manifest.kv_bytes_per_token}
    record["artifact"]["footprint"] = footprint
    (root / "evaluation" / "dev.json").write_text(json.dumps(record), encoding="utf-8")
    return root, context


def synth(root: Path, context: dict[str, Any], tmp: Path) -> None:
    build_app("dev", context={**context, "allow_placeholders": "true"}, outdir=str(tmp / "cdk.out"), root=root)


def refusal(root: Path, context: dict[str, Any], tmp: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        synth(root, context, tmp)
    return caught.value


def test_synth_refuses_a_footprint_of_another_model(tmp_path: Path, packaged: tuple[Path, str]) -> None:
    out, _ = packaged
    root, context = repository(tmp_path, out / "manifest.json")
    synth(root, copy.deepcopy(context), tmp_path / "bound")  # cdk.json's footprint is the evaluated manifest's
    context["environments"]["dev"]["model"]["footprint"] = dict(PROD_FOOTPRINT)  # another model's, left in cdk.json
    error = refusal(root, context, tmp_path)
    assert isinstance(error, FootprintContradicted)
    manifest = read_manifest(out / "manifest.json")
    assert (
        f"environments.dev.model.footprint is gguf_bytes {PROD_FOOTPRINT['gguf_bytes']}, kv_bytes_per_token "
        f"{PROD_FOOTPRINT['kv_bytes_per_token']}, but the manifest evaluation/dev.json evaluated (model "
        f"{MODEL_SHA256[:12]}) has gguf_bytes {manifest.size_bytes}, kv_bytes_per_token {manifest.kv_bytes_per_token}"
    ) in str(error)
    print(error)


def test_synth_refuses_an_instance_too_small_for_the_configured_state_cache(
    tmp_path: Path, packaged: tuple[Path, str]
) -> None:
    out, _ = packaged
    root, context = repository(tmp_path, out / "manifest.json")
    cpu = context["environments"]["dev"]["cpu"]
    cpu["adapter"] = {"state_cache_mb": 8192}
    error = refusal(root, context, tmp_path)
    assert isinstance(error, InstanceTooSmall)
    manifest = read_manifest(out / "manifest.json")
    assert manifest.kv_bytes_per_token is not None
    needed = memory_needed_mb(
        manifest.size_bytes, manifest.kv_bytes_per_token, ctx_size=cpu["ctx_size"], contexts=1, state_cache_mb=8192
    )
    assert needed > 8 * 1024 - HOST_RESERVED_MB  # the cache alone is the instance's 8 GiB
    message = str(error)
    assert f"environments.dev.cpu: ml.c6i.xlarge has 8 GiB ({8 * 1024 - HOST_RESERVED_MB} MB after" in message
    assert f"the model needs {needed} MB (GGUF 88 MB, 1 decision context(s) of 4096 tokens at 23040 bytes" in message
    assert f"the configured state cache 8192 MB, runtime {RUNTIME_OVERHEAD_MB} MB" in message
    assert "the smallest type that fits is ml.c6i.2xlarge" in message
    print(error)


def test_synth_takes_the_footprint_from_the_record_where_cdk_json_has_none(
    tmp_path: Path, packaged: tuple[Path, str]
) -> None:
    """An instances-hosted section needs no cdk.json footprint: the evaluated manifest's sizes it, and refuses here
    a pool of instances too small for 16 contexts of 8,192 tokens."""
    out, _ = packaged
    root, context = repository(tmp_path, out / "manifest.json")
    dev = context["environments"]["dev"]
    dev["model"].pop("footprint")
    dev["cpu"].update(instance_type="ml.c5.large", ctx_size=8192, max_concurrency=16, max_queue=16)
    dev["cpu"]["hosting"] = {"mode": "instances"}
    dev["cpu"]["autoscaling"].update(min_instances=1, target_concurrent_requests_per_instance=16)
    message = str(refusal(root, context, tmp_path))
    kv_context_mb = 23040 * 8192 / (1 << 20)
    cache_mb = min(STATE_CACHE_CAP_BYTES, STATE_CACHE_CONTEXTS * 23040 * 8192) / (1 << 20)
    assert f"16 decision context(s) of 8192 tokens at 23040 bytes a token {16 * round(kv_context_mb)} MB" in message
    assert f"the default state cache {round(cache_mb)} MB (2 contexts, at most 1 GiB)" in message
    assert "ml.c5.large has 4 GiB" in message and "the smallest type that fits is ml.c5.xlarge" in message
    dev["cpu"]["instance_type"] = "ml.c5.xlarge"
    synth(root, context, tmp_path / "fits")


def test_the_smallest_type_that_fits_stays_in_the_family_and_the_kind() -> None:
    assert smallest_fitting("ml.c6i.xlarge", 9000, None) == "ml.c6i.2xlarge"
    assert smallest_fitting("ml.g5.xlarge", 20000, 30000) == "ml.g5.12xlarge"  # four A10Gs: 96 GiB of GPU memory
    assert smallest_fitting("ml.g4dn.xlarge", 20000, 20 * 1024) == "ml.g4dn.12xlarge"  # four T4s: 64 GiB together
    assert smallest_fitting("ml.g4dn.xlarge", 20000, 70 * 1024) == "ml.g5.12xlarge"  # no g4dn holds 70 GiB
    assert smallest_fitting("ml.c6i.xlarge", 10 << 20, None) is None
    assert INSTANCE_MEMORY["ml.c6i.8xlarge"].memory_gib == 64 and INSTANCE_MEMORY["ml.g6e.xlarge"].gpu_memory_gib == 48
    assert memory_needed_mb(1, 1, ctx_size=1, contexts=1) == 1 + RUNTIME_OVERHEAD_MB
