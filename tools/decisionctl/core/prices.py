"""Hourly instance prices and serverless inference's prices (a small editable, dated table) and what a decision costs
at a measured throughput."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

BUILTIN = "builtin"


@dataclass(frozen=True)
class ServerlessPrices:
    """SageMaker serverless inference: compute per GB-second of configured memory, data processed, per request."""

    per_gb_second: float
    per_gb_processed: float
    per_request: float
    checked: bool
    note: str


@dataclass(frozen=True)
class PriceTable:
    hourly: dict[str, float]
    currency: str
    region: str
    checked: bool
    note: str
    source: str
    date: str = ""
    serverless: ServerlessPrices | None = None

    def price(self, instance_type: str) -> float:
        if instance_type not in self.hourly:
            raise ValueError(f"no price for {instance_type} in {self.source}; known: {', '.join(sorted(self.hourly))}")
        return self.hourly[instance_type]

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "currency": self.currency,
            "region": self.region,
            "checked": self.checked,
            "note": self.note,
            "date": self.date,
            "hourly": self.hourly,
            "serverless": None if self.serverless is None else dict(vars(self.serverless)),
        }


def load_prices(path: str = BUILTIN) -> PriceTable:
    """The table shipped in the package (data/prices.json), or an operator's own file of the same shape."""
    if path == BUILTIN:
        text = resources.files("decisionctl").joinpath("data/prices.json").read_text(encoding="utf-8")
        source = "decisionctl/data/prices.json (shipped examples)"
    else:
        text, source = Path(path).read_text(encoding="utf-8"), path
    data = json.loads(text)
    hourly = {str(k): float(v) for k, v in data["hourly"].items()}
    if any(v <= 0 for v in hourly.values()):
        raise ValueError(f"{source}: hourly prices must be positive")
    serverless = data.get("serverless")
    return PriceTable(
        hourly,
        str(data.get("currency", "USD")),
        str(data.get("region", "")),
        bool(data.get("checked", False)),
        str(data.get("note", "")),
        source,
        str(data.get("date", "")),
        _serverless(serverless, source) if serverless is not None else None,
    )


def _serverless(data: dict[str, Any], source: str) -> ServerlessPrices:
    prices = {key: float(data[key]) for key in ("per_gb_second", "per_gb_processed", "per_request")}
    if any(v < 0 for v in prices.values()) or prices["per_gb_second"] <= 0:
        raise ValueError(f"{source}: serverless prices must be >= 0, per_gb_second > 0")
    return ServerlessPrices(**prices, checked=bool(data.get("checked", False)), note=str(data.get("note", "")))


def cost_per_1000(hourly_price: float, decisions_per_s: float) -> float | None:
    """Hourly price / (throughput * 3600) * 1000: one instance kept busy at the measured rate."""
    if decisions_per_s <= 0:
        return None
    return hourly_price / (decisions_per_s * 3600) * 1000
