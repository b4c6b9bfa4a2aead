"""cfn-lint on every synthesized template (each environment, the optional-features variant and each hosting mode's
variants): no errors."""

from __future__ import annotations

import pytest
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]

from tests.cdk_support import HOSTING_VARIANTS, VARIANTS, cdk_context, synthesize


@pytest.mark.parametrize("variant", VARIANTS + HOSTING_VARIANTS)
def test_templates_have_no_cfn_lint_errors(variant: str) -> None:
    synth = synthesize(variant)
    files = synth.template_files()
    github = synth.app.node.try_get_context("github") or {}
    assert len(files) == (3 if github.get("owner") else 2)  # the GitHub stack where the pipeline is configured
    for path in files:
        matches = lint_file(path, ManualArgs(regions=[synth.config.region]))
        errors = [f"{m.rule.id} {m.path_string}: {m.message}" for m in matches if m.rule.id.startswith("E")]
        assert errors == [], f"{path.name}:\n" + "\n".join(errors)


def test_every_environment_of_cdk_json_is_linted() -> None:
    """A new environment in cdk.json must be added to VARIANTS, or neither cfn-lint nor cdk-nag would see it."""
    assert set(cdk_context()["environments"]) <= set(VARIANTS)
