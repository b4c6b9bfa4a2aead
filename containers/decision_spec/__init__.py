"""What the adapter, the stacks and decisionctl all know, written once: the decision contract and the question
types' names, memory sizing, the cdk.json schema (every section's model, and `load_environment`, which validates an
environment as synth does), the evaluation record's format, instance-type facts and the DLC registries. Pure (the
standard library and pydantic) and importing nothing of the three; it ships in the image beside the adapter."""
