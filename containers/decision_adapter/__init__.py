"""Decision adapter: the System One decision API over llama.cpp logits, in SageMaker's container contract."""

# The one place the adapter's version and release date are written: pyproject.toml reads the version from here,
# and /v1/models, run identity and the OpenAPI document report both.
__version__ = "0.1.0"
RELEASE_DATE = "2026-11-30"
