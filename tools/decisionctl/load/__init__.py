"""Load tests: closed-loop load per concurrency level, generated workloads, prices, the autoscaling target."""
