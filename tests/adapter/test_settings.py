"""Settings: SM_LLAMA_CPP_* names as on the stock container; invalid values name the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from decision_adapter.core.settings import (
    AdapterSettings,
    RuntimeSettings,
    SettingsError,
    available_cores,
    load_adapter_settings,
    runtime_from_env,
    runtime_variables,
    threads_per_context,
)
from pydantic import AliasChoices
from pydantic.fields import FieldInfo


def test_stock_container_names_map_to_runtime_parameters() -> None:
    rt = runtime_from_env(
        {
            "SM_LLAMA_CPP_CTX_SIZE": "2048",
            "SM_LLAMA_CPP_THREADS": "4",
            "SM_LLAMA_CPP_N_GPU_LAYERS": "999",
            "SM_LLAMA_CPP_FLASH_ATTN": "true",
            "SM_LLAMA_CPP_NO_MMAP": "true",
            "SM_LLAMA_CPP_MODEL": "sub/m.gguf",
            "PATH": "/bin",
        }
    )
    kwargs = rt.llama_kwargs(n_ctx_train=8192)
    assert (kwargs["n_ctx"], kwargs["n_threads"], kwargs["n_gpu_layers"]) == (2048, 4, 999)
    assert kwargs["flash_attn"] is True and kwargs["use_mmap"] is False
    assert rt.model == "sub/m.gguf" and rt.ignored == ()


def test_default_context_is_the_models_capped_at_8192() -> None:
    assert runtime_from_env({}).llama_kwargs(n_ctx_train=2048)["n_ctx"] == 2048
    assert runtime_from_env({}).llama_kwargs(n_ctx_train=131072)["n_ctx"] == 8192


def test_unknown_runtime_variables_are_reported_and_ignored() -> None:
    rt = runtime_from_env({"SM_LLAMA_CPP_N_PARALLEL": "4", "SM_LLAMA_CPP_THREADS": "2"})
    assert rt.ignored == ("SM_LLAMA_CPP_N_PARALLEL",) and rt.n_threads == 2


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("SM_LLAMA_CPP_CTX_SIZE", "big"),
        ("SM_LLAMA_CPP_THREADS", "0"),
        ("SM_LLAMA_CPP_FLASH_ATTN", "maybe"),
        ("SM_LLAMA_CPP_NO_MMAP", "2"),
    ],
)
def test_invalid_runtime_values_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=var):
        runtime_from_env({var: value})


def test_sagemaker_port_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_BIND_TO_PORT", "9001")
    assert AdapterSettings().port == 9001


def test_invalid_adapter_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISION_MAX_QUEUE", "-3")
    with pytest.raises(SettingsError, match="DECISION_MAX_QUEUE"):
        load_adapter_settings()


def test_chat_is_off_unless_asked_for_so_decisions_get_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local default is what the stacks deploy (DECISION_CHAT_CONTEXTS=0): no chat context takes cores."""
    monkeypatch.delenv("DECISION_CHAT_CONTEXTS", raising=False)
    monkeypatch.delenv("DECISION_MAX_CONCURRENCY", raising=False)
    settings = AdapterSettings()
    assert settings.chat_contexts == 0
    contexts = settings.max_concurrency + settings.chat_contexts
    assert runtime_from_env({}).llama_kwargs(4096, contexts=contexts)["n_threads"] == available_cores()
    asked = runtime_from_env({}).llama_kwargs(4096, contexts=contexts + 1)["n_threads"]
    assert asked == threads_per_context(2) and (available_cores() < 2 or asked < available_cores())


def _readme_settings_rows() -> list[tuple[list[str], str]]:
    """The README's adapter settings table: each row's variables and its default cell."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### The adapter (environment variables)") :]
    table = section[: section.index("\n\n", section.index("|---|"))]
    rows = []
    for line in table.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append((re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]), cells[1]))
    return rows


def _settings_variables() -> dict[str, FieldInfo]:
    """Every variable the adapter reads -> the field it sets (AdapterSettings and RuntimeSettings: one mechanism)."""
    out: dict[str, FieldInfo] = {}
    for name, info in AdapterSettings.model_fields.items():
        alias = info.validation_alias
        for variable in alias.choices if isinstance(alias, AliasChoices) else [f"DECISION_{name.upper()}"]:
            out[str(variable)] = info
    return out | {variable: RuntimeSettings.model_fields[name] for variable, name in runtime_variables().items()}


def _literal(cell: str) -> object:
    """A default cell that is a value (a number, true/false, a word, a path, N MiB); NOT_A_VALUE for prose."""
    cell = cell.strip("`")
    if re.fullmatch(r"-?\d+", cell):
        return int(cell)
    if re.fullmatch(r"-?\d+\.\d+", cell):
        return float(cell)
    if cell in ("true", "false"):
        return cell == "true"
    if mib := re.fullmatch(r"(\d+) MiB", cell):
        return int(mib[1]) << 20
    if re.fullmatch(r"[a-z]+|/[\w/]+|\d+\.\d+\.\d+\.\d+", cell):
        return cell
    return NOT_A_VALUE


NOT_A_VALUE = object()


def test_readme_settings_table_is_the_settings_fields() -> None:
    """Every variable the README lists is a field, every field is listed, each has a description, and a default
    the table states as a value is the field's (an empty cell: the field's default is unset)."""
    variables = _settings_variables()
    rows = _readme_settings_rows()
    listed = [v for names, _ in rows for v in names]
    assert sorted(set(listed)) == sorted(variables) and len(listed) == len(set(listed))
    assert all(info.description for info in variables.values())
    checked = 0
    for names, cell in rows:
        literal = _literal(cell)
        for name in names:
            default = variables[name].default
            if cell == "":
                assert default in (None, "", False, 0), (name, default)
            elif literal is not NOT_A_VALUE:
                assert (str(default) if isinstance(literal, str) else default) == literal, (name, cell, default)
                checked += 1
    assert checked >= 20
