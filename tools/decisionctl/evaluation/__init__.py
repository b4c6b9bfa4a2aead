"""Evaluation: labeled cases scored on an endpoint, their metrics, fitted temperatures and slot prior, runs compared."""
