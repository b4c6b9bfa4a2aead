"""Decision adapter: the System One decision API over llama.cpp logits, in SageMaker's container contract."""

__version__ = "0.1.0"
