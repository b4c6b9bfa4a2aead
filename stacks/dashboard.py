"""One dashboard per environment: a row per endpoint (latency, invocations, errors, capacity), and its answers by
action where a policy is served. A components endpoint shows its copies and the invocations turned away at zero; a
serverless one its cold starts (ModelSetupTime)."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct
from decision_spec.hosting_config import ServerlessHosting

from stacks.component_scaling import NO_CAPACITY_METRIC
from stacks.observability import EndpointAlarms

SAGEMAKER_INSTANCES = "/aws/sagemaker/Endpoints"
SAGEMAKER_COMPONENTS = "/aws/sagemaker/InferenceComponents"


def build_dashboard(scope: Construct, *, environment: str, endpoints: Sequence[EndpointAlarms]) -> cloudwatch.Dashboard:
    """One row per endpoint: latency, invocations, errors, instance count."""
    dashboard = cloudwatch.Dashboard(scope, "Dashboard", dashboard_name=f"DecisionEndpoints-{environment}")
    for alarms in endpoints:
        name = alarms.endpoint.endpoint_name
        errors: list[cloudwatch.IMetric] = [
            alarms.metric("Invocation4XXErrors", "Sum", label="4xx"),
            alarms.metric("Invocation5XXErrors", "Sum", label="5xx"),
            alarms.metric("InvocationModelErrors", "Sum", label="Model errors"),
        ]
        if alarms.overload_rejections is not None:
            errors.append(alarms.overload_rejections)
        dashboard.add_widgets(cloudwatch.TextWidget(markdown=f"### {name}", width=24, height=1))
        pool = alarms.endpoint.settings.instance_types
        latency: list[cloudwatch.IMetric] = [alarms.metric("ModelLatency", p, label=p) for p in ("p50", "p95", "p99")]
        if len(pool) > 1:
            latency += [alarms.metric("ModelLatency", "p95", label=f"p95 {t}", instance_type=t) for t in pool]
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: model latency (µs)",
                left=latency,
                right=[alarms.metric("OverheadLatency", "p95", label="overhead p95")],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: invocations",
                left=[alarms.metric("Invocations", "Sum", label="invocations")],
                right=[_concurrency(alarms)],
                width=6,
            ),
            cloudwatch.GraphWidget(title=f"{name}: errors", left=errors, width=6),
            _capacity(alarms),
        )
        if alarms.action_counts:
            dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title=f"{name}: answers by action (% of answers under the served policy)",
                    left=[alarms.action_rate(action) for action in alarms.action_counts],
                    left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
                    width=24,
                )
            )
    return dashboard


def _concurrency(alarms: EndpointAlarms) -> cloudwatch.IMetric:
    """The metric the endpoint scales on: concurrent requests per copy, or per instance (one model each)."""
    if alarms.endpoint.component_name is not None:
        return alarms.metric(
            "ConcurrentRequestsPerCopy", "Average", label="concurrent requests per copy (the scaling metric)"
        )
    return alarms.metric(
        "ConcurrentRequestsPerModel", "Average", label="concurrent requests per instance (the scaling metric)"
    )


def _capacity(alarms: EndpointAlarms) -> cloudwatch.GraphWidget:
    """What runs: instances reporting (each reports CPUUtilization once a minute), a component's copies reporting and
    the invocations turned away at zero, or a serverless endpoint's cold starts."""
    name, minute = alarms.endpoint.endpoint_name, cdk.Duration.minutes(1)
    if isinstance(alarms.endpoint.hosting, ServerlessHosting):
        setup = alarms.metric("ModelSetupTime", "SampleCount", label="cold starts (ModelSetupTime samples)")
        return cloudwatch.GraphWidget(title=f"{name}: cold starts", left=[setup], width=6)
    if alarms.endpoint.component_name is not None:
        copies = alarms.metric(
            "CPUUtilizationNormalized", "SampleCount", namespace=SAGEMAKER_COMPONENTS, label="copies reporting"
        ).with_(period=minute)
        turned_away = alarms.metric(NO_CAPACITY_METRIC, "Sum", label="turned away at zero (wakes a copy)")
        return cloudwatch.GraphWidget(title=f"{name}: copies", left=[copies], right=[turned_away], width=6)
    instances = alarms.metric(
        "CPUUtilization", "SampleCount", namespace=SAGEMAKER_INSTANCES, label="instances reporting"
    ).with_(period=minute)
    return cloudwatch.GraphWidget(title=f"{name}: instances", left=[instances], width=6)
