"""Alarms per endpoint and one dashboard per environment.

Rates are metric math over the endpoint's own counts; overload rejections come from the adapter's
JSON log lines (`{"event": "overload_rejected", ...}`, its 429s), counted by a metric filter on the
endpoint's log group, because SageMaker folds container 429s into its generic 4xx count. Under a served
threshold policy each `decision` line also counts its answers per action (`automated`, `reviewed`,
`abstained`); metric filters sum them, and the automation rate alarms when it leaves a configured band.

Alarms watch the variant (EndpointName, VariantName). SageMaker keeps publishing those aggregates when the
variant runs an instance pool, and adds the same metrics with an InstanceType dimension (SageMaker guide,
"Monitor instance pools"). A pool's GPUs differ several-fold in speed, so one p95 over the mixed fleet would
read a batch landing on the slowest type as a regression: a pooled variant gets one ModelLatency p95 alarm per
pool type instead, each with that type's threshold from the config. Every alarm fires when
`datapoints_to_alarm` of its `evaluation_periods` periods breach (M of N), so an intermittent fault that
breaches some periods but not every one still fires it. The rollback alarms of an update
(`EndpointAlarms.rollback_alarms`, stacks/guardrails.py) are the 5xx rate, ModelLatency p95 and runtime
failures: the adapter's `runtime_failure` lines on a decision endpoint, InvocationModelErrors on the stock
chat endpoint.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct
from decision_spec import events
from decision_spec.environment_sections import Alarms

from stacks.component_scaling import NO_CAPACITY_METRIC
from stacks.decision_shift import ACTION_METRICS
from stacks.endpoint import ServingEndpoint
from stacks.log_retention import LOG_RETENTION

SAGEMAKER = "AWS/SageMaker"
OVERLOAD_PATTERN = f'{{ $.event = "{events.OVERLOAD_REJECTED}" }}'
RUNTIME_FAILURE_PATTERN = f'{{ $.event = "{events.RUNTIME_FAILURE}" }}'
# action -> (the adapter's per-request count field in its `decision` line, the metric that sums it)
ACTION_COUNTS = {action: (field, ACTION_METRICS[action]) for action, field in events.ACTION_COUNT_FIELDS.items()}


def action_pattern(field: str) -> str:
    """Decision lines that carry the count; a metric value must be matched by the pattern to be read."""
    return f'{{ $.event = "{events.DECISION}" && $.{field} >= 0 }}'


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
        counts_actions: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.period = cdk.Duration.seconds(thresholds.period_seconds)
        self.evaluation_periods = thresholds.evaluation_periods
        self.datapoints_to_alarm = thresholds.datapoints_to_alarm
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
            "errors": self._alarm(
                "InvocationErrors",
                name=f"{name}-invocation-errors",
                metric=self.metric("InvocationModelErrors", "Sum"),
                threshold=t.invocation_errors,
                description=f"{name} had more than {t.invocation_errors} invocation (model) errors",
            ),
        }
        self.latency_alarms = self._latency_alarms()
        self.alarms.update(self.latency_alarms)
        self.overload_rejections: cloudwatch.Metric | None = None
        if counts_overload:
            lines = logs.MetricFilter(
                self,
                "OverloadRejectedLines",
                log_group=endpoint.container_log_group,
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
            failures = logs.MetricFilter(
                self,
                "RuntimeFailureLines",
                log_group=endpoint.container_log_group,
                filter_pattern=logs.FilterPattern.literal(RUNTIME_FAILURE_PATTERN),
                metric_namespace=overload_namespace(name),
                metric_name="RuntimeFailures",
                metric_value="1",
                default_value=0,
            )
            self.alarms["runtime"] = self._alarm(
                "RuntimeFailures",
                name=f"{name}-runtime-failures",
                metric=failures.metric(statistic="Sum", period=self.period, label="Runtime failures"),
                threshold=t.runtime_failures,
                description=f"{name}'s model runtime failed more than {t.runtime_failures} requests (500, "
                "runtime_failure log lines)",
            )
        self.action_counts: dict[str, cloudwatch.Metric] = {}
        if counts_actions:
            self._count_actions(t)
            self._watch_input_flags(t)
        for alarm in self.alarms.values():
            alarm.add_alarm_action(actions.SnsAction(topic))
            alarm.add_ok_action(actions.SnsAction(topic))

    @property
    def rollback_alarms(self) -> list[cloudwatch.Alarm]:
        """What rolls an update back: errors, slowness (per pool type), and the runtime failing (the adapter's or
        SageMaker's count). The one list guard_updates hands SageMaker: further rollback signals join it here."""
        return [
            self.alarms["5xx"],
            *self.latency_alarms.values(),
            self.alarms.get("runtime", self.alarms["errors"]),
        ]

    def _latency_alarms(self) -> dict[str, cloudwatch.Alarm]:
        """ModelLatency p95 of the variant, or of each type of a pool (a threshold per type, from the config)."""
        settings, name = self.endpoint.settings, self.endpoint.endpoint_name
        pool = settings.instance_types
        if len(pool) == 1:
            ms = settings.latency_p95_ms(pool[0])
            return {
                "latency": self._alarm(
                    "ModelLatencyP95",
                    name=f"{name}-model-latency-p95",
                    metric=self.metric("ModelLatency", "p95"),
                    threshold=ms * 1000,  # ModelLatency is in microseconds
                    description=f"{name}'s ModelLatency p95 is above {ms} ms",
                )
            }
        alarms = {}
        for instance_type in pool:
            ms = settings.latency_p95_ms(instance_type)
            label = instance_type.removeprefix("ml.")
            alarms[f"latency {instance_type}"] = self._alarm(
                "ModelLatencyP95" + "".join(part.capitalize() for part in label.split(".")),
                name=f"{name}-model-latency-p95-{label}",
                metric=self.metric("ModelLatency", "p95", instance_type=instance_type),
                threshold=ms * 1000,
                description=f"{name}'s ModelLatency p95 on {instance_type} is above {ms} ms",
            )
        return alarms

    def _summed(self, field: str, metric_name: str) -> cloudwatch.Metric:
        """A count field of the adapter's `decision` lines, summed per period by a metric filter on the log group."""
        lines = logs.MetricFilter(
            self,
            f"{metric_name}Lines",
            log_group=self.endpoint.container_log_group,
            filter_pattern=logs.FilterPattern.literal(action_pattern(field)),
            metric_namespace=overload_namespace(self.endpoint.endpoint_name),
            metric_name=metric_name,
            metric_value=f"$.{field}",
        )
        return lines.metric(statistic="Sum", period=self.period, label=metric_name)

    def _count_actions(self, t: Alarms) -> None:
        name = self.endpoint.endpoint_name
        for action, (field, metric_name) in ACTION_COUNTS.items():
            self.action_counts[action] = self._summed(field, metric_name)
        if t.automation_rate_band is None:
            return
        low, high = t.automation_rate_band
        # A period with fewer answers than the minimum reads as inside the band: too few to judge a rate.
        self.alarms["automation_low"] = self._alarm(
            "AutomationRateLow",
            name=f"{name}-automation-rate-low",
            metric=self.action_rate("automate", min_answers=t.automation_rate_min_answers, quiet=100.0),
            threshold=low,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description=f"{name} automated less than {low}% of its answers: live traffic is less certain than the "
            "evaluation set the policy was measured on (more reviews and abstentions)",
        )
        self.alarms["automation_high"] = self._alarm(
            "AutomationRateHigh",
            name=f"{name}-automation-rate-high",
            metric=self.action_rate("automate", min_answers=t.automation_rate_min_answers, quiet=0.0),
            threshold=high,
            description=f"{name} automated more than {high}% of its answers: traffic differs from the evaluation "
            "set, or the model is more confident than it was measured to be",
        )

    def _watch_input_flags(self, t: Alarms) -> None:
        """The share of answers whose caller text raised an input flag: a rise means someone writes control strings
        or orders to the classifier into the text decisions read (docs/security.md)."""
        name = self.endpoint.endpoint_name
        counts = {
            "answers": self._summed(events.ANSWERS_FIELD, "DecisionAnswers"),
            "flagged": self._summed(events.INPUT_FLAGGED_FIELD, "InputFlaggedAnswers"),
        }
        self.input_flagged_share = cloudwatch.MathExpression(
            expression=f"IF(answers >= {t.input_flagged_min_answers}, 100 * flagged / answers, 0)",
            using_metrics=counts,
            period=self.period,
            label="input flagged (% of answers)",
        )
        self.alarms["input_flagged"] = self._alarm(
            "InputFlaggedShare",
            name=f"{name}-input-flagged-share",
            metric=self.input_flagged_share,
            threshold=t.input_flagged_percent,
            description=f"More than {t.input_flagged_percent}% of {name}'s answers read caller text with control "
            "strings or orders to the classifier: look for an injection campaign (decision lines' input_flags)",
        )

    def action_rate(self, action: str, *, min_answers: int = 1, quiet: float = 0.0) -> cloudwatch.MathExpression:
        """Percent of the period's answers that got `action`; `quiet` when fewer than `min_answers` were counted."""
        answers = " + ".join(self.action_counts)
        return cloudwatch.MathExpression(
            expression=f"IF({answers} >= {min_answers}, 100 * {action} / ({answers}), {quiet:g})",
            using_metrics=dict(self.action_counts),
            period=self.period,
            label=f"{action} (% of answers)",
        )

    def metric(
        self,
        name: str,
        statistic: str,
        *,
        namespace: str = SAGEMAKER,
        label: str | None = None,
        instance_type: str | None = None,
    ) -> cloudwatch.Metric:
        dimensions = self.endpoint.metric_dimensions
        if instance_type is not None:  # one type of a pooled variant
            dimensions["InstanceType"] = instance_type
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=name,
            dimensions_map=dimensions,
            statistic=statistic,
            period=self.period,
            label=label,
        )

    def error_rate(self, errors: str) -> cloudwatch.MathExpression:
        """Percent of invocations that got `errors`. A component's invocations turned away while it is at zero copies
        (each a 400 that wakes it) are taken out: an endpoint does not alarm merely for being at zero."""
        using = {"errors": self.metric(errors, "Sum"), "invocations": self.metric("Invocations", "Sum")}
        counted = "errors"
        if self.endpoint.component_name is not None and errors == "Invocation4XXErrors":
            using["nocapacity"] = self.metric(NO_CAPACITY_METRIC, "Sum")
            counted = "IF(errors > FILL(nocapacity, 0), errors - FILL(nocapacity, 0), 0)"
        return cloudwatch.MathExpression(
            expression=f"IF(invocations > 0, 100 * {counted} / invocations, 0)",
            using_metrics=using,
            period=self.period,
            label=f"{errors} (% of invocations)",
        )

    def _alarm(
        self,
        construct_id: str,
        *,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=self.evaluation_periods,
            datapoints_to_alarm=self.datapoints_to_alarm,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
