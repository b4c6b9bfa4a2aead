"""The run identity fields (x_run, decision-api.md) worth naming when two runs differ: comparisons and records."""

from __future__ import annotations

IDENTITY_FIELDS = (
    "model_file",
    "model_sha256",
    "llama_cpp_python",
    "llama_cpp_build",
    "adapter",
    "image_digest",
    "instance_types",
    "hardware",
    "n_gpu_layers",
    "prompt_template",
    "order_debias",
    "order_debias_mode",
    "order_debias_tolerance",
    "calibration",
    "policy",
)
