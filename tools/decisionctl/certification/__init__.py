"""Certification: error bounds of automated answers, the bands evaluate certifies, the policy written from them."""
