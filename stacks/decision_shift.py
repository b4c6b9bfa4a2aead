"""Decision-shift metrics and alarms: what the `decision_shift` section of cdk.json builds per endpoint.

The section's model is decision_spec.loop_config.DecisionShift (the cdk.json schema).

A policy records the mix it was certified with (`policy.certified_mix` in manifest.json: each action's share
of the labeled cases and each question's option mix); `decision_shift.certified` is that block, copied into
cdk.json with the policy's version. Metric filters on the endpoint's log group turn the adapter's `decision`
lines into sums per policy version (the `Policy` dimension, from the line's `policy` field): answers per
action, label mass and its answers, and the picks of each option of the routing questions named. A policy is
bound to its model and calibration, so each version is one variant's decisions: a canary, or a shadow,
serving a new model, calibration or policy writes under its own version, apart from the fleet it replaces.

Alarms watch the configured version: any action share more than `action_band_points` percentage points from
the certified one, any routing option's share more than `option_band_points` from its certified share, the
mean label mass below `min_mean_label_mass`. A period with fewer than `min_answers` answers reads as inside
the band. They join the endpoint's rollback alarms (M of N periods, as every alarm), so a canary whose
decisions shift rolls back during its bake. SageMaker watches at most 10 rollback alarms and a metric math
alarm reads at most 10 metrics; both are checked when the configuration is read.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from constructs import Construct
from decision_spec import events
from decision_spec.loop_config import DecisionShift
from decision_spec.policy import CertifiedMix

# decision_spec.loop_config's names, for the callers that still import them from here
__all__ = [
    "ACTION_METRICS",
    "POLICY_DIMENSION",
    "DecisionShiftAlarms",
    "action_shift_expression",
    "decision_pattern",
    "label_mass_expression",
    "option_metric_ids",
    "option_shift_expression",
    "question_totals",
]

POLICY_DIMENSION = "Policy"
# action -> the metric id of the decision line's per-request count (decision_spec.events.ACTION_COUNT_FIELDS)
ACTION_METRICS: dict[str, str] = {
    "automate": "AutomatedAnswers",
    "review": "ReviewedAnswers",
    "abstain": "AbstainedAnswers",
}


def decision_pattern(field: str, at_least: int = 0) -> str:
    """Decision lines that carry the field (a metric value is read only from lines the pattern matches)."""
    return f'{{ $.event = "{events.DECISION}" && $.{field} >= {at_least} }}'


def action_shift_expression(certified: CertifiedMix, min_answers: int) -> str:
    """The largest distance, in percentage points, of an action's share from its certified share."""
    answers = " + ".join(events.ACTION_COUNT_FIELDS)
    terms = [f"ABS(100 * {a} / ({answers}) - {100 * certified.actions[a]:g})" for a in events.ACTION_COUNT_FIELDS]
    return f"IF({answers} >= {min_answers}, MAX([{', '.join(terms)}]), 0)"


def option_metric_ids(shift: DecisionShift) -> dict[str, tuple[str, int]]:
    """Metric id -> (routing question, option index); ids are p<question's place>_<option index>."""
    return {
        f"p{j}_{i}": (q, i)
        for j, q in enumerate(shift.routing_questions)
        for i in range(len(shift.certified.questions[q].options))
    }


def question_totals(shift: DecisionShift) -> dict[str, str]:
    """Expression id n<question's place> -> that routing question's answers in the period (missing picks as 0)."""
    ids = option_metric_ids(shift)
    return {
        f"n{j}": " + ".join(f"FILL({m}, 0)" for m, (question, _) in ids.items() if question == q)
        for j, q in enumerate(shift.routing_questions)
    }


def option_shift_expression(shift: DecisionShift) -> str:
    """The largest distance, in points, of a routing option's share (of its question's answers, n<j>) from its
    certified share; a question with fewer than min_answers answers in the period counts as 0."""
    terms = []
    for j, q in enumerate(shift.routing_questions):
        for i, share in enumerate(shift.certified.questions[q].shares):
            terms.append(f"IF(n{j} >= {shift.min_answers}, ABS(100 * FILL(p{j}_{i}, 0) / n{j} - {100 * share:g}), 0)")
    return f"MAX([{', '.join(terms)}])"


def label_mass_expression(min_answers: int) -> str:
    return f"IF(lm_answers >= {min_answers}, lm_sum / lm_answers, 1)"


class DecisionShiftAlarms(Construct):
    """The metric filters and alarms of one decision endpoint's log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        log_group: logs.ILogGroup,
        namespace: str,
        shift: DecisionShift,
        period: cdk.Duration,
        evaluation_periods: int,
        datapoints_to_alarm: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.shift = shift
        self.namespace = namespace
        self.period = period
        self._m_of_n = (evaluation_periods, datapoints_to_alarm)
        self.filters: dict[str, logs.MetricFilter] = {}
        self.actions: dict[str, cloudwatch.IMetric] = {
            a: self._sum(ACTION_METRICS[a], decision_pattern(f), f"$.{f}", log_group)
            for a, f in events.ACTION_COUNT_FIELDS.items()
        }
        actions = self.actions
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        version = shift.policy_version
        self.alarms["actions"] = self._alarm(
            "ActionShift",
            name=f"{endpoint_name}-decision-shift-actions",
            expression=action_shift_expression(shift.certified, shift.min_answers),
            using=actions,
            threshold=shift.action_band_points,
            description=f"{endpoint_name}: under policy {version}, an action's share of answers is more than "
            f"{shift.action_band_points:g} points from the share certified "
            + ", ".join(f"{a} {100 * s:.1f}%" for a, s in shift.certified.actions.items()),
        )
        if shift.routing_questions:
            picks = {}
            for metric_id, (question, i) in option_metric_ids(shift).items():
                key = events.picked_key(question, i)
                picks[metric_id] = self._sum(
                    f"Picked-{question}-{i}",
                    decision_pattern(f"{events.PICKED_FIELD}.{key}", 1),
                    f"$.{events.PICKED_FIELD}.{key}",
                    log_group,
                )
            totals: dict[str, cloudwatch.IMetric] = {
                n: cloudwatch.MathExpression(expression=e, using_metrics=dict(picks), period=period)
                for n, e in question_totals(shift).items()
            }
            self.alarms["options"] = self._alarm(
                "OptionShift",
                name=f"{endpoint_name}-decision-shift-options",
                expression=option_shift_expression(shift),
                using={**picks, **totals},
                threshold=shift.option_band_points,
                description=f"{endpoint_name}: under policy {version}, an option of a routing question "
                f"({', '.join(shift.routing_questions)}) is picked more than {shift.option_band_points:g} points "
                "away from its certified share",
            )
        if shift.min_mean_label_mass is not None:
            masses = {
                "lm_sum": self._sum(
                    "LabelMassSum",
                    decision_pattern(events.LABEL_MASS_ANSWERS_FIELD, 1),
                    f"$.{events.LABEL_MASS_SUM_FIELD}",
                    log_group,
                ),
                "lm_answers": self._sum(
                    "LabelMassAnswers",
                    decision_pattern(events.LABEL_MASS_ANSWERS_FIELD, 1),
                    f"$.{events.LABEL_MASS_ANSWERS_FIELD}",
                    log_group,
                ),
            }
            self.alarms["label_mass"] = self._alarm(
                "LabelMassLow",
                name=f"{endpoint_name}-label-mass-low",
                expression=label_mass_expression(shift.min_answers),
                using=masses,
                threshold=shift.min_mean_label_mass,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                description=f"{endpoint_name}: under policy {version}, the mean label mass is below "
                f"{shift.min_mean_label_mass:g} (the model puts its probability outside the declared options)",
            )

    def widget(self) -> cloudwatch.GraphWidget:
        """The watched version's action shares beside the distance the action alarm reads."""
        answers = " + ".join(events.ACTION_COUNT_FIELDS)
        shares: list[cloudwatch.IMetric] = [
            cloudwatch.MathExpression(
                expression=f"100 * {a} / ({answers})",
                using_metrics=dict(self.actions),
                period=self.period,
                label=f"{a} (% of answers; certified {100 * share:.1f})",
            )
            for a, share in self.shift.certified.actions.items()
        ]
        return cloudwatch.GraphWidget(
            title=f"{self.endpoint_name}: decisions under policy {self.shift.policy_version}",
            left=shares,
            left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            right=[self.alarms["actions"].metric],
            width=24,
        )

    @property
    def rollback_alarms(self) -> list[cloudwatch.Alarm]:
        return list(self.alarms.values())

    def _sum(self, metric_name: str, pattern: str, value: str, log_group: logs.ILogGroup) -> cloudwatch.Metric:
        """A metric filter summing `value` per policy version, and the metric of the configured version."""
        self.filters[metric_name] = logs.MetricFilter(
            self,
            f"{metric_name.replace('-', '')}ByPolicy",
            log_group=log_group,
            filter_pattern=logs.FilterPattern.literal(pattern),
            metric_namespace=self.namespace,
            metric_name=metric_name,
            metric_value=value,
            dimensions={POLICY_DIMENSION: f"$.{events.POLICY_FIELD}"},
        )
        return cloudwatch.Metric(
            namespace=self.namespace,
            metric_name=metric_name,
            dimensions_map={POLICY_DIMENSION: self.shift.policy_version},
            statistic="Sum",
            period=self.period,
        )

    def _alarm(
        self,
        construct_id: str,
        *,
        name: str,
        expression: str,
        using: Mapping[str, cloudwatch.IMetric],
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> cloudwatch.Alarm:
        evaluation_periods, datapoints = self._m_of_n
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=name,
            alarm_description=description,
            metric=cloudwatch.MathExpression(expression=expression, using_metrics=dict(using), period=self.period),
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
