"""Live traffic: data capture read back, joined with final answers, checked against a policy, shadow compared."""
