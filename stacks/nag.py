"""cdk-nag 3 acknowledgements: one finding at a time, each with the reason a reviewer would accept.

cdk-nag 3 is a policy-validation plugin (`Validations.of(app).add_plugins(AwsSolutionsChecks(app))`);
a finding is acknowledged on the construct that causes it (or an ancestor) by its full id, e.g.
`AwsSolutions-IAM5[Resource::*]`. Acknowledgements are construct metadata, so tests can list them.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

MIN_REASON_LENGTH = 40


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `scope` and its children."""
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule_id} needs a specific reason, got {reason!r}")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def acknowledged(scope: IConstruct) -> dict[str, dict[str, str]]:
    """Every acknowledgement under `scope`: construct path -> {rule id: reason}."""
    key = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    found: dict[str, dict[str, str]] = {}
    for node in scope.node.find_all():
        for entry in node.node.metadata:
            if entry.type == key and isinstance(entry.data, dict):
                found.setdefault(node.node.path, {}).update({str(k): str(v) for k, v in entry.data.items()})
    return found


def arn_finding(construct: IConstruct, suffix: str = "") -> str:
    """How cdk-nag writes a resource that names `construct`'s ARN attribute: `<LogicalId.Arn><suffix>`."""
    return f"<{_logical_id(construct)}.Arn>{suffix}"


def ref_finding(construct: IConstruct) -> str:
    """How cdk-nag writes a `Ref` to `construct`: `<LogicalId>`."""
    return f"<{_logical_id(construct)}>"


def arn_prefix(scope: IConstruct, service: str) -> str:
    """`arn:<partition>:<service>:<region>:<account>` as cdk-nag prints it (pseudo parameters in angle brackets)."""
    stack = cdk.Stack.of(scope)
    parts = [
        _literal(stack.partition, "<AWS::Partition>"),
        service,
        _literal(stack.region, "<AWS::Region>"),
        _literal(stack.account, "<AWS::AccountId>"),
    ]
    return "arn:" + ":".join(parts)


def _literal(value: str, pseudo: str) -> str:
    return pseudo if cdk.Token.is_unresolved(value) else value


def _logical_id(construct: IConstruct) -> str:
    element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    if not isinstance(element, cdk.CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return cdk.Stack.of(construct).get_logical_id(element)


def object_finding(bucket: s3.IBucket, pattern: str) -> str:
    """How cdk-nag writes `bucket.arn_for_objects(pattern)` of a bucket in another stack: `<export name>/<pattern>`.

    The ARN arrives as an import of the bucket stack's export; `export_value` returns that same import.
    """
    imported = cdk.Stack.of(bucket).resolve(cdk.Stack.of(bucket).export_value(bucket.bucket_arn))
    return f"{imported['Fn::ImportValue']}/{pattern}"
