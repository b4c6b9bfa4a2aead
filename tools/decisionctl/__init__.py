"""decisionctl: the operator tools for decision endpoints (decide, package-model, evaluate, bench)."""
