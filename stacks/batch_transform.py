"""Batch Transform on a decision endpoint's Model: a state machine that runs one Transform job per execution.

An execution's input is `{"run": NAME}`: the job transforms every object under `batch/input/NAME/` of the
model bucket (JSON Lines, one decision body a line, `SplitType=Line`, mini-batches of `MultiRecord`) and
writes `batch/output/NAME/<execution name>/<object>.out` (one answer line per input line, in order). The job
is named `<env>-batch-<execution name>`, so every execution starts its own job and a re-submitted
execution name never starts a second one. `decisionctl batch run --transform ENV` drives it.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct
from decision_spec.bulk_config import BatchTransform
from decision_spec.instance_types import has_local_nvme
from decision_spec.names import JSON_LINES

from stacks.nag import acknowledge, arn_prefix, object_finding

INPUT_PREFIX = "batch/input/"
OUTPUT_PREFIX = "batch/output/"
# Step Functions' .sync integration learns that a job ended from this rule, which it creates itself.
SYNC_RULE = "StepFunctionsGetEventsForSageMakerTransformJobsRule"
# What the execution returns: enough for `decisionctl batch run` to time and price the job.
JOB_FIELDS = (
    "TransformJobName",
    "TransformJobStatus",
    "TransformStartTime",
    "TransformEndTime",
    "TransformResources",
)
# Vended log delivery (the state machine's own log group) has no resource-level permissions.
LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:DescribeLogGroups",
    "logs:DescribeResourcePolicies",
    "logs:GetLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:UpdateLogDelivery",
)


def job_name_prefix(environment: str) -> str:
    return f"{environment}-batch-"


class BatchTransformJobs(Construct):
    """The state machine, its role, the job's S3 grants on the Model's role, an optional schedule, an alarm."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        settings: BatchTransform,
        model_name: str,
        model_role: iam.IRole,
        bucket: s3.IBucket,
        key: kms.IKey,
        alarm_topic: sns.ITopic,
        alarm_period: cdk.Duration,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.input_uri = f"s3://{bucket.bucket_name}/{INPUT_PREFIX}"
        self.output_uri = f"s3://{bucket.bucket_name}/{OUTPUT_PREFIX}"
        self.job_prefix = job_name_prefix(environment)
        encrypt_volume = not has_local_nvme(settings.instance_type)
        self._grant_job_data(model_role, bucket, key)

        run = sfn.JsonPath.string_at("$.run")
        self.task = tasks.SageMakerCreateTransformJob(
            self,
            "Transform",
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            transform_job_name=sfn.JsonPath.format(f"{self.job_prefix}{{}}", sfn.JsonPath.execution_name),
            model_name=model_name,
            # The job runs as the Model's own execution role; passing it keeps CDK from creating another.
            role=model_role,
            batch_strategy=tasks.BatchStrategy.MULTI_RECORD,
            max_concurrent_transforms=settings.max_concurrent_transforms,
            max_payload=cdk.Size.mebibytes(settings.max_payload_mb),
            model_client_options=tasks.ModelClientOptions(
                invocations_max_retries=settings.invocation_max_retries,
                invocations_timeout=cdk.Duration.seconds(settings.invocation_timeout_seconds),
            ),
            transform_input=tasks.TransformInput(
                transform_data_source=tasks.TransformDataSource(
                    s3_data_source=tasks.TransformS3DataSource(
                        s3_uri=sfn.JsonPath.format(f"{self.input_uri}{{}}/", run),
                        s3_data_type=tasks.S3DataType.S3_PREFIX,
                    )
                ),
                content_type=JSON_LINES,
                split_type=tasks.SplitType.LINE,
            ),
            # Outputs are encrypted by the bucket's default SSE-KMS with the environment key.
            transform_output=tasks.TransformOutput(
                s3_output_path=sfn.JsonPath.format(f"{self.output_uri}{{}}/{{}}/", run, sfn.JsonPath.execution_name),
                accept=JSON_LINES,
                assemble_with=tasks.AssembleWith.LINE,
            ),
            transform_resources=tasks.TransformResources(
                instance_count=settings.instance_count,
                instance_type=ec2.InstanceType(settings.instance_type.removeprefix("ml.")),
                # Instance types with local NVMe reject a volume key: their instance storage is always encrypted.
                volume_encryption_key=key if encrypt_volume else None,
            ),
            result_selector={f"{field}.$": f"$.{field}" for field in JOB_FIELDS},
            task_timeout=sfn.Timeout.duration(cdk.Duration.hours(settings.timeout_hours)),
        )

        # The state machine and its log group hold no data (answers are in S3, job logs are SageMaker's): always
        # deleted with the stack, so their fixed names never block a redeploy after a destroy.
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description=f"Step Functions role of the {environment} Batch Transform state machine",
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=f"decision-{environment}-batch",
            definition_body=sfn.DefinitionBody.from_chainable(self.task),
            state_machine_type=sfn.StateMachineType.STANDARD,
            # CDK's own statements for this task allow every transform job and ListTags on "*"; the exact
            # statements below replace them.
            role=self.role.without_policy_updates(),
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            timeout=cdk.Duration.hours(settings.timeout_hours + 1),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self._grant_state_machine(key if encrypt_volume else None)
        acknowledge(
            self.state_machine,
            "AwsSolutions-SF2",
            "One task state that waits on a Transform job: the execution history and the job's own logs and "
            "metrics show every step, X-Ray would trace nothing more",
        )

        self.schedule: scheduler.CfnSchedule | None = None
        if settings.schedule is not None:
            self.schedule = self._schedule(environment)
        self.failed_alarm = self._failed_alarm(environment, alarm_topic, alarm_period)

        for output_id, value in (
            ("BatchStateMachineArn", self.state_machine.state_machine_arn),
            ("BatchInputUri", self.input_uri),
            ("BatchOutputUri", self.output_uri),
        ):
            # Stable output keys: decisionctl reads them with DescribeStacks.
            cdk.CfnOutput(self, output_id, value=value).override_logical_id(output_id)

    def _grant_job_data(self, role: iam.IRole, bucket: s3.IBucket, key: kms.IKey) -> None:
        """The job reads only the input prefix and writes only the output prefix (the Model's role already
        reads the model object and decrypts through S3)."""
        stack = cdk.Stack.of(self)
        via_s3 = {"StringEquals": {"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"}}
        statements = [
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{INPUT_PREFIX}*")]),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": f"{INPUT_PREFIX}*"}},
            ),
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[bucket.arn_for_objects(f"{OUTPUT_PREFIX}*")],
            ),
            iam.PolicyStatement(actions=["kms:GenerateDataKey"], resources=[key.key_arn], conditions=via_s3),
        ]
        for statement in statements:
            role.add_to_principal_policy(statement)
        self.job_statements = statements
        for prefix in (INPUT_PREFIX, OUTPUT_PREFIX):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{object_finding(bucket, prefix + '*')}]",
                f"A Transform job reads every object of its input folder and writes its answers under "
                f"{OUTPUT_PREFIX}; object names are known only at run time, so the grant is one prefix",
            )

    def _grant_state_machine(self, volume_key: kms.IKey | None) -> None:
        stack = cdk.Stack.of(self)
        jobs = stack.format_arn(service="sagemaker", resource="transform-job", resource_name=f"{self.job_prefix}*")
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:CreateTransformJob",
                    "sagemaker:DescribeTransformJob",
                    "sagemaker:ListTags",
                    "sagemaker:StopTransformJob",
                ],
                resources=[jobs],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["events:DescribeRule", "events:PutRule", "events:PutTargets"],
                resources=[stack.format_arn(service="events", resource="rule", resource_name=SYNC_RULE)],
            )
        )
        if volume_key is not None:
            # SageMaker encrypts the job's volumes through a grant that the caller of CreateTransformJob makes.
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["kms:CreateGrant", "kms:DescribeKey"],
                    resources=[volume_key.key_arn],
                    conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
                )
            )
        self.role.add_to_policy(iam.PolicyStatement(actions=list(LOG_DELIVERY_ACTIONS), resources=["*"]))
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{arn_prefix(self, 'sagemaker')}:transform-job/{self.job_prefix}*]",
            "Job names are the environment's prefix plus the execution name, known only when an execution starts",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "CloudWatch Logs vended log delivery (the state machine's own log group) has no resource-level "
            "permissions; AWS requires Resource *",
        )

    def _schedule(self, environment: str) -> scheduler.CfnSchedule:
        schedule = self.settings.schedule
        assert schedule is not None
        stack = cdk.Stack.of(self)
        self.schedule_role = iam.Role(
            self,
            "ScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            description=f"EventBridge Scheduler role that starts the {environment} Batch Transform state machine",
        )
        self.schedule_role.add_to_policy(
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.state_machine.state_machine_arn])
        )
        return scheduler.CfnSchedule(
            self,
            "Schedule",
            description=f"Transforms batch/input/{schedule.run}/ of the {environment} model bucket",
            schedule_expression=schedule.expression,
            schedule_expression_timezone=schedule.timezone,
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.state_machine.state_machine_arn,
                role_arn=self.schedule_role.role_arn,
                input=json.dumps({"run": schedule.run}),
                # A missed run shows as the failed-execution alarm; a retry would transform the same input twice.
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(maximum_retry_attempts=0),
            ),
        )

    def _failed_alarm(self, environment: str, topic: sns.ITopic, period: cdk.Duration) -> cloudwatch.Alarm:
        machine = self.state_machine
        alarm = cloudwatch.Alarm(
            self,
            "ExecutionsFailed",
            alarm_name=f"decision-{environment}-batch-executions-failed",
            alarm_description=f"A {environment} Batch Transform execution failed or timed out",
            metric=cloudwatch.MathExpression(
                expression="FILL(failed, 0) + FILL(timed_out, 0)",
                using_metrics={
                    "failed": machine.metric_failed(statistic="Sum", period=period),
                    "timed_out": machine.metric_timed_out(statistic="Sum", period=period),
                },
                period=period,
                label="Failed or timed-out executions",
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.SnsAction(topic))
        return alarm
