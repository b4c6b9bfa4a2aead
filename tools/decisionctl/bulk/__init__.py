"""Bulk decisions: a JSONL file through Batch Transform, an asynchronous endpoint or a local adapter, resumably."""
