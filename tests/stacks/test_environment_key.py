"""Issue 29 items 2 and 3 in the synthesized templates: who may use the environment key, and for what.

Endpoint log groups (every decision line) are encrypted with the environment key, which CloudWatch Logs may use
for this environment's endpoint log groups only; CloudWatch may use it for this environment's alarms only; the
image build's role (privileged Docker on third-party base images) only through S3. Each variant is the session's
synthesis (tests/cdk_support.py).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from tests.cdk_support import Synthesized, as_list, by_ref, role_statements

LOGS_CONTEXT = "kms:EncryptionContext:aws:logs:arn"
ENDPOINT_LOGS = "/aws/sagemaker/Endpoints/"


def _key_policy(s: Synthesized) -> list[dict[str, Any]]:
    (key,) = s.resources("Foundation", "AWS::KMS::Key").values()
    statements: list[dict[str, Any]] = key["Properties"]["KeyPolicy"]["Statement"]
    return statements


def _service_statement(s: Synthesized, service: str) -> dict[str, Any]:
    (statement,) = [st for st in _key_policy(s) if st["Principal"].get("Service") == service]
    return statement


def _arn(value: Any, s: Synthesized) -> str:
    """A Fn::Join ARN with the pseudo parameters of this variant (its account where pinned, else a stand-in)."""
    if isinstance(value, str):
        return value
    pseudo = {"AWS::Partition": "aws", "AWS::Region": s.config.region, "AWS::AccountId": s.config.account or "ACCOUNT"}
    separator, parts = value["Fn::Join"]
    return str(separator).join(p if isinstance(p, str) else pseudo[p["Ref"]] for p in parts)


def _key_export(s: Synthesized) -> str:
    """The export name under which Foundation shares its key's ARN."""
    (key_id,) = s.resources("Foundation", "AWS::KMS::Key")
    (name,) = [
        output["Export"]["Name"]
        for output in s.template_json("Foundation")["Outputs"].values()
        if output["Value"] == {"Fn::GetAtt": [key_id, "Arn"]} and "Export" in output
    ]
    return str(name)


def _other_environment(s: Synthesized) -> str:
    return "prod" if s.environment == "dev" else "dev"


def test_endpoint_log_groups_are_encrypted_with_the_environment_key(synth: Synthesized) -> None:
    groups = [
        g["Properties"]
        for g in synth.resources("Serving", "AWS::Logs::LogGroup").values()
        if str(g["Properties"].get("LogGroupName", "")).startswith(ENDPOINT_LOGS)
    ]
    assert groups
    for group in groups:
        assert group["KmsKeyId"] == {"Fn::ImportValue": _key_export(synth)}


def test_logs_may_use_the_key_for_this_environments_endpoint_log_groups_only(synth: Synthesized) -> None:
    statement = _service_statement(synth, f"logs.{synth.config.region}.amazonaws.com")
    patterns = [_arn(p, synth) for p in as_list(statement["Condition"]["ArnLike"][LOGS_CONTEXT])]
    assert set(statement["Condition"]) == {"ArnLike"}
    account = synth.config.account or "ACCOUNT"
    prefix = f"arn:aws:logs:{synth.config.region}:{account}:log-group:{ENDPOINT_LOGS}"
    names = [
        g["Properties"]["LogGroupName"]
        for g in synth.resources("Serving", "AWS::Logs::LogGroup").values()
        if str(g["Properties"].get("LogGroupName", "")).startswith(ENDPOINT_LOGS)
    ]
    for name in names:  # each endpoint log group can be encrypted (a denied key fails its create)...
        assert any(fnmatchcase(f"arn:aws:logs:{synth.config.region}:{account}:log-group:{name}", p) for p in patterns)
    other = _other_environment(synth)
    for foreign in (f"{prefix}decision-{other}-cpu", f"{prefix}chat-{other}-cpu", f"{prefix[:-10]}/aws/lambda/x"):
        assert not any(fnmatchcase(foreign, p) for p in patterns), foreign  # ...and nothing else


def test_cloudwatch_may_use_the_key_for_this_environments_alarms_only(synth: Synthesized) -> None:
    statement = _service_statement(synth, "cloudwatch.amazonaws.com")
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert statement["Condition"]["StringEquals"] == {
        "aws:SourceAccount": synth.config.account or {"Ref": "AWS::AccountId"}
    }
    patterns = [_arn(p, synth) for p in as_list(statement["Condition"]["ArnLike"]["aws:SourceArn"])]
    account = synth.config.account or "ACCOUNT"
    alarm = f"arn:aws:cloudwatch:{synth.config.region}:{account}:alarm:"
    names = [a["Properties"]["AlarmName"] for a in synth.resources("Serving", "AWS::CloudWatch::Alarm").values()]
    assert names
    for name in names:  # every alarm of this environment can still notify the encrypted topic...
        assert isinstance(name, str) and any(fnmatchcase(alarm + name, p) for p in patterns), name
    other = _other_environment(synth)
    assert not any(fnmatchcase(f"{alarm}decision-{other}-cpu-5xx", p) for p in patterns)  # ...no other's


def test_the_image_build_role_uses_the_key_only_through_s3(synth: Synthesized) -> None:
    (project,) = synth.resources("Serving", "AWS::CodeBuild::Project").values()
    assert project["Properties"]["EncryptionKey"] == {"Fn::ImportValue": _key_export(synth)}
    role = by_ref(synth.template_json("Serving")["Resources"], project["Properties"]["ServiceRole"])
    kms = [s for s in role_statements(synth, role) if any(str(a).startswith("kms:") for a in as_list(s["Action"]))]
    assert kms
    for statement in kms:
        assert statement["Condition"] == {
            "StringEquals": {"kms:ViaService": f"s3.{synth.config.region}.amazonaws.com"}
        }, statement
