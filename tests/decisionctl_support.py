"""Decision replies for decisionctl's tests that start no adapter: the wire JSON the adapter sends, built by hand."""

from __future__ import annotations

from typing import Any

from decision_spec.schemas import DecisionResponse


def x_run(*, model_sha256: str = "ab" * 32, temperature: dict[str, float] | None = None) -> dict[str, Any]:
    """A whole `x_run` as the adapter writes it (decision-api.md); only the model and calibration vary."""
    return {
        "model_file": "model.gguf",
        "model_sha256": model_sha256,
        "model_name": "model",
        "llama_cpp_python": "0.3.16",
        "llama_cpp_build": "b1",
        "adapter": "0.1.0",
        "image_digest": "unset",
        "instance_types": "unset",
        "hardware": {"cpu": "cpu", "logical_cpus": 2, "threads": 2, "machine": "x86_64", "gpus": []},
        "n_gpu_layers": 0,
        "prompt_template": "generic-v2/gguf-chat-template",
        "order_debias": True,
        "calibration": {"source": "manifest" if temperature else "identity", "temperature": temperature or {}},
        "request_id": "r1",
        "state_source": "computed",
    }


def reply(answer: dict[str, Any], *, run: dict[str, Any] | None = None) -> DecisionResponse:
    """The typed reply to a one-question request (question id "q"); without `run` it has no x_run, as
    another conformant server's reply."""
    body: dict[str, Any] = {"model": "m", "answers": {"q": answer}, "usage": {"input_tokens": 3, "output_tokens": 0}}
    if run is not None:
        body["x_run"] = run
    return DecisionResponse.model_validate(body)
