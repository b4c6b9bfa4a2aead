"""Alarms per endpoint and one dashboard per environment.

Rates are metric math over the endpoint's own counts; overload rejections come from the adapter's
JSON log lines (`{"event": "overload_rejected", ...}`, its 429s), counted by a metric filter on the
endpoint's log group, because SageMaker folds container 429s into its generic 4xx count.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import LOG_RETENTION, Alarms
from stacks.endpoint import ServingEndpoint

SAGEMAKER = "AWS/SageMaker"
SAGEMAKER_INSTANCES = "/aws/sagemaker/Endpoints"
OVERLOAD_PATTERN = '{ $.event = "overload_rejected" }'


def log_retention(days: int) -> logs.RetentionDays:
    """The configuration has already checked that `days` is one of CloudWatch's periods."""
    return LOG_RETENTION[days]


def overload_namespace(endpoint_name: str) -> str:
    return f"DecisionEndpoints/{endpoint_name}"


class EndpointAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: ServingEndpoint,
        thresholds: Alarms,
        latency_p95_ms: int,
        topic: sns.ITopic,
        counts_overload: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.period = cdk.Duration.seconds(thresholds.period_seconds)
        self.evaluation_periods = thresholds.evaluation_periods
        name = endpoint.endpoint_name
        t = thresholds
        self.alarms: dict[str, cloudwatch.Alarm] = {
            "5xx": self._alarm(
                "Http5xxRate",
                name=f"{name}-5xx-rate",
                metric=self.error_rate("Invocation5XXErrors"),
                threshold=t.http_5xx_rate_percent,
                description=f"More than {t.http_5xx_rate_percent}% of {name}'s invocations got a 5xx",
            ),
            "4xx": self._alarm(
                "Http4xxRate",
                name=f"{name}-4xx-rate",
                metric=self.error_rate("Invocation4XXErrors"),
                threshold=t.http_4xx_rate_percent,
                description=f"More than {t.http_4xx_rate_percent}% of {name}'s invocations got a 4xx",
            ),
            "latency": self._alarm(
                "ModelLatencyP95",
                name=f"{name}-model-latency-p95",
                metric=self.metric("ModelLatency", "p95"),
                threshold=latency_p95_ms * 1000,  # ModelLatency is in microseconds
                description=f"{name}'s ModelLatency p95 is above {latency_p95_ms} ms",
            ),
            "errors": self._alarm(
                "InvocationErrors",
                name=f"{name}-invocation-errors",
                metric=self.metric("InvocationModelErrors", "Sum"),
                threshold=t.invocation_errors,
                description=f"{name} had more than {t.invocation_errors} invocation (model) errors",
            ),
        }
        self.overload_rejections: cloudwatch.Metric | None = None
        if counts_overload:
            lines = logs.MetricFilter(
                self,
                "OverloadRejectedLines",
                log_group=endpoint.log_group,
                filter_pattern=logs.FilterPattern.literal(OVERLOAD_PATTERN),
                metric_namespace=overload_namespace(name),
                metric_name="OverloadRejections",
                metric_value="1",
                default_value=0,
            )
            self.overload_rejections = lines.metric(statistic="Sum", period=self.period, label="Overload rejections")
            self.alarms["overload"] = self._alarm(
                "OverloadRejections",
                name=f"{name}-overload-rejections",
                metric=self.overload_rejections,
                threshold=t.overload_rejections,
                description=f"{name} rejected more than {t.overload_rejections} requests as overloaded (429): "
                "scale out or raise DECISION_MAX_QUEUE",
            )
        for alarm in self.alarms.values():
            alarm.add_alarm_action(actions.SnsAction(topic))
            alarm.add_ok_action(actions.SnsAction(topic))

    def metric(
        self, name: str, statistic: str, *, namespace: str = SAGEMAKER, label: str | None = None
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=name,
            dimensions_map={"EndpointName": self.endpoint.endpoint_name, "VariantName": self.endpoint.variant_name},
            statistic=statistic,
            period=self.period,
            label=label,
        )

    def error_rate(self, errors: str) -> cloudwatch.MathExpression:
        return cloudwatch.MathExpression(
            expression="IF(invocations > 0, 100 * errors / invocations, 0)",
            using_metrics={"errors": self.metric(errors, "Sum"), "invocations": self.metric("Invocations", "Sum")},
            period=self.period,
            label=f"{errors} (% of invocations)",
        )

    def _alarm(
        self, construct_id: str, *, name: str, metric: cloudwatch.IMetric, threshold: float, description: str
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=self.evaluation_periods,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )


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
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: model latency (µs)",
                left=[alarms.metric("ModelLatency", p, label=p) for p in ("p50", "p95", "p99")],
                right=[alarms.metric("OverheadLatency", "p95", label="overhead p95")],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: invocations",
                left=[alarms.metric("Invocations", "Sum", label="invocations")],
                right=[alarms.metric("InvocationsPerInstance", "Sum", label="per instance (scaling metric)")],
                width=6,
            ),
            cloudwatch.GraphWidget(title=f"{name}: errors", left=errors, width=6),
            cloudwatch.GraphWidget(
                title=f"{name}: instances",
                # Each in-service instance reports CPUUtilization once a minute.
                left=[
                    alarms.metric(
                        "CPUUtilization", "SampleCount", namespace=SAGEMAKER_INSTANCES, label="instances reporting"
                    ).with_(period=cdk.Duration.minutes(1))
                ],
                width=6,
            ),
        )
    return dashboard
