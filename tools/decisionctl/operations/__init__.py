"""Day two: what an environment runs and was evaluated as, its adapter's log lines, going back a model."""
