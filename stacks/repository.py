"""The ECR repository the decision images are pushed to and the endpoints pull from, by digest."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from constructs import Construct

from stacks.config import removal_policy_of


class ImageRepository(Construct):
    """Scan on push, immutable tags (a tag names one build forever), lifecycle rules, KMS encryption."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        keep_images: int | None,
        untagged_expiry_days: int,
        destroy_on_delete: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self,
            "Repository",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS,
            encryption_key=key,
            lifecycle_rules=lifecycle_rules(keep_images, untagged_expiry_days),
            removal_policy=removal_policy_of(destroy_on_delete),
            empty_on_delete=destroy_on_delete,
        )


def lifecycle_rules(keep_images: int | None, untagged_expiry_days: int) -> list[ecr.LifecycleRule]:
    """Untagged leftovers always expire; built images only where `keep_images` is set (null keeps every one)."""
    rules = [
        ecr.LifecycleRule(
            rule_priority=1,
            description="Untagged layers left by interrupted pushes",
            tag_status=ecr.TagStatus.UNTAGGED,
            max_image_age=cdk.Duration.days(untagged_expiry_days),
        )
    ]
    if keep_images is not None:
        rules.append(
            ecr.LifecycleRule(
                rule_priority=2,
                description="Keep the newest builds; endpoints and rollbacks pull recent digests",
                tag_status=ecr.TagStatus.ANY,
                max_image_count=keep_images,
            )
        )
    return rules
