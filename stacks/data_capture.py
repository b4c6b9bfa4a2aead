"""Data capture of a decision endpoint's answers (never its requests), from the `data_capture` section of cdk.json.

The section's model is decision_spec.loop_config.DataCapture (the cdk.json schema).

SageMaker writes each sampled invocation's response as JSON Lines under
`s3://<model bucket>/<prefix>/<endpoint>/<variant>/yyyy/mm/dd/hh/`, encrypted with the environment's key;
`decisionctl outcomes` and `compare --shadow` read them (docs/loop.md). The capture mode is Output only:
the decision response holds answers, option names and the run identity, no state or instructions, so
customer text never reaches S3. Listing the JSON content types keeps `data` as text instead of base64.
The prefix expires after `expiry_days` (a lifecycle rule on the model bucket, stacks/model_artifacts.py).
Only the real-time decision endpoints capture: the chat endpoint's output is generated text.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from decision_spec.loop_config import DataCapture

from stacks.nag import acknowledge, object_finding

CAPTURE_MODE = "Output"  # answers only: the request holds the customer's text
JSON_CONTENT_TYPES = ("application/json", "application/jsonlines")


def capture_config(
    settings: DataCapture, *, bucket: s3.IBucket, key: kms.IKey
) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty:
    """The endpoint config's DataCaptureConfig: output only, the environment's key, JSON kept as text."""
    cfn = sagemaker.CfnEndpointConfig
    return cfn.DataCaptureConfigProperty(
        enable_capture=True,
        capture_options=[cfn.CaptureOptionProperty(capture_mode=CAPTURE_MODE)],
        destination_s3_uri=f"s3://{bucket.bucket_name}/{settings.prefix}",
        initial_sampling_percentage=settings.sampling_percent,
        kms_key_id=key.key_arn,
        capture_content_type_header=cfn.CaptureContentTypeHeaderProperty(json_content_types=list(JSON_CONTENT_TYPES)),
    )


def grant_capture(role: iam.IRole, settings: DataCapture, *, bucket: s3.IBucket, key: kms.IKey) -> None:
    """SageMaker writes the captured answers with the endpoint's execution role: put under the prefix only, and
    encrypt with the environment's key only through S3."""
    stack = cdk.Stack.of(role)
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{settings.prefix}/*")])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["kms:GenerateDataKey", "kms:Encrypt"],
            resources=[key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"}},
        )
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{object_finding(bucket, settings.prefix + '/*')}]",
        "SageMaker data capture names its objects by endpoint, variant, hour and a random id at run time; the "
        "grant is put-only and limited to the capture prefix",
    )


def expire_captures(bucket: s3.Bucket, settings: DataCapture) -> None:
    """Captured answers (and, the bucket being versioned, their old versions) go after expiry_days."""
    bucket.add_lifecycle_rule(
        id="ExpireCapturedAnswers",
        prefix=f"{settings.prefix}/",
        expiration=cdk.Duration.days(settings.expiry_days),
        noncurrent_version_expiration=cdk.Duration.days(1),
    )
