"""For each setting that changes answers, a value other than the adapter's default (what an artifact records) and a
second value that contradicts it (what a stray environment variable or cdk.json key would say): the tests of each
layer that carries an artifact's answer settings read them here, one row per setting."""

from __future__ import annotations

from typing import Any

# name -> (the artifact's value, a contradicting value)
CARRIED: dict[str, tuple[Any, Any]] = {
    "order_debias": ("rotations", "reverse"),
    "adaptive_tolerance": (0.2, 0.34),
    "state_boundary": ("tagged", "off"),
    "option_labels": ("names", "letters"),
    "out_of_scope": (True, False),
    "min_label_mass": (0.5, 0.25),
    "rotation_max_options": (4, 8),
    "debias_max_options": (12, 26),
}
