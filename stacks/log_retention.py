"""The CDK's value for each log retention period CloudWatch Logs accepts (cdk.json's `log_retention_days`): the
periods and their names are decision_spec.environment_sections' (LOG_RETENTION_PERIODS), looked up in CDK's enum."""

from __future__ import annotations

from aws_cdk import aws_logs as logs
from decision_spec.environment_sections import LOG_RETENTION_PERIODS

LOG_RETENTION: dict[int, logs.RetentionDays] = {
    days: logs.RetentionDays[name] for days, name in LOG_RETENTION_PERIODS.items()
}
