"""Release: a model packaged with its manifest, the DLC image digests pinned in cdk.json."""
