"""Where each region's AWS Deep Learning Container registry lives, and each partition's console domain.

The DLC images are published per region, mostly by account 763104351884, but opt-in regions and the
China partition have registries of their own. Source: aws/deep-learning-containers
`available_images.md`, "Region Availability" (the regions with general containers). A region that is
not listed here stops synth rather than letting CodeBuild fail minutes later on an image it cannot pull.
Plain data: synth (environment_config.py, stacks/serving_stack.py) and `decisionctl pin-images` read this one table.
"""

from __future__ import annotations

DEFAULT_REGISTRY_ACCOUNT = "763104351884"

_OWN_REGISTRY = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-7": "590183813437",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
}
_DEFAULT_REGISTRY_REGIONS = (
    "ap-east-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ca-central-1",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
)
DLC_REGISTRY_ACCOUNTS: dict[str, str] = dict(
    sorted({**dict.fromkeys(_DEFAULT_REGISTRY_REGIONS, DEFAULT_REGISTRY_ACCOUNT), **_OWN_REGISTRY}.items())
)

# The AWS Management Console of each partition (the dashboard link must open in the partition it is in).
_CONSOLE_DOMAINS = {
    "aws": "console.aws.amazon.com",
    "aws-cn": "console.amazonaws.cn",
    "aws-us-gov": "console.amazonaws-us-gov.com",
}


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def console_domain(region: str) -> str:
    return _CONSOLE_DOMAINS[partition_of(region)]


def registry_account(region: str) -> str | None:
    """The DLC registry account of `region`, or None where no DLC registry is published."""
    return DLC_REGISTRY_ACCOUNTS.get(region)
