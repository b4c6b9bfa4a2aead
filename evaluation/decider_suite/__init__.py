"""The decider suite's generator (evaluation/DATASHEET.md): four kinds of state, three labeled questions over each."""
