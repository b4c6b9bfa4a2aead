"""The actions a threshold policy gives an answer and the reasons it gives (the answers' `x_action` fields)."""

from __future__ import annotations

from typing import Literal

Action = Literal["automate", "review", "abstain"]
# Why an answer got its action: its confidence in its question's own band or in its type's band, too little of
# the model's probability on the labels, the model's pick of "none of these", or no band for its type.
# "confidence_band" is what adapters before per-question bands sent; clients still read it, this one never sends it.
Reason = Literal[
    "question_band", "type_band", "low_label_mass", "out_of_scope", "not_measured", "confidence_band", "input_flagged"
]
