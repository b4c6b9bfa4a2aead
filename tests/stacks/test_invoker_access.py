"""Invoker access (stacks/invoker_access.py): off unless configured; when on, one managed policy per environment
that invokes exactly that environment's real-time endpoints (and mints bearer tokens where asked), exported.
One synth with cdk-nag (build_app registers it: an unacknowledged finding fails the synth)."""

from __future__ import annotations

import copy
import functools
import tempfile
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from decision_spec.environment_config import load_environment

from app import build_app
from stacks.invoker_access import CALL_WITH_BEARER_TOKEN, INVOKE, InvokerPolicy, export_name, policy_name
from tests.cdk_support import VARIANT_ACCOUNT, cdk_context, variant_context

REGION = "eu-west-1"


def test_off_unless_configured() -> None:
    environments = cdk_context()["environments"]
    assert all(load_environment(environments, name).invoker_access is None for name in environments)


@functools.cache
def serving_with_invokers() -> dict[str, Any]:
    context = copy.deepcopy(variant_context())  # dev, its account pinned, with a chat endpoint beside the cpu one
    context["environments"]["dev"]["invoker_access"] = {"enabled": True, "bearer_token": True}
    outdir = tempfile.mkdtemp(prefix="cdk-invokers-")
    assembly = build_app("dev", context=context, outdir=outdir).synth()
    template: dict[str, Any] = assembly.get_stack_by_name("DecisionEndpoints-dev-Serving").template
    return template


def endpoint_arn(name: str, region: str) -> str:
    return f"arn:aws:sagemaker:{region}:{VARIANT_ACCOUNT}:endpoint/{name}"


def test_the_policy_invokes_exactly_the_environments_endpoints_and_mints_tokens() -> None:
    template = serving_with_invokers()
    config = load_environment(variant_context()["environments"], "dev")
    policies = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    (policy,) = policies
    properties = policy["Properties"]
    assert properties["ManagedPolicyName"] == policy_name("dev")
    assert not {"Roles", "Users", "Groups"} & set(properties)  # attached by applications, to their own roles
    invoke, mint = properties["PolicyDocument"]["Statement"]
    names = ["decision-dev-cpu", "chat-dev-cpu"]  # the variant's real-time endpoints, and only them
    # and dev's inference component (hosting.mode components), which every call of decision-dev-cpu names
    component = endpoint_arn("decision-dev-cpu-model", config.region).replace(":endpoint/", ":inference-component/")
    assert invoke == {
        "Sid": "InvokeTheEndpoints",
        "Effect": "Allow",
        "Action": INVOKE,
        "Resource": sorted([*(endpoint_arn(n, config.region) for n in names), component]),
    }
    assert mint == {"Sid": "MintBearerTokens", "Effect": "Allow", "Action": CALL_WITH_BEARER_TOKEN, "Resource": "*"}
    outputs = Template.from_json(template).find_outputs("InvokerPolicyArn")
    (output,) = outputs.values()
    assert output["Export"] == {"Name": export_name("dev")}


def test_without_bearer_tokens_it_only_invokes() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account=VARIANT_ACCOUNT, region=REGION))
    InvokerPolicy(stack, "Invokers", environment="prod", endpoint_names=["decision-prod-gpu"], bearer_token=False)
    Template.from_stack(stack).has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "InvokeTheEndpoints",
                        "Effect": "Allow",
                        "Action": INVOKE,
                        "Resource": stack.resolve(
                            stack.format_arn(
                                service="sagemaker", resource="endpoint", resource_name="decision-prod-gpu"
                            )
                        ),
                    }
                ],
            }
        },
    )
