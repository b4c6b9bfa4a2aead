"""Review: an evaluation bound to each model artifact, the decision diff of two, deployed variants checked."""
