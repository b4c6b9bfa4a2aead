"""The adapter's ground floor: the decision contract and its limits, the request and answer models, the question
types, errors and settings, the arithmetic on logits and the tools that read caller text; imported by the prompting
and serving layers above it, and importing nothing of theirs."""
