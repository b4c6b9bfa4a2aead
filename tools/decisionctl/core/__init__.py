"""What every job shares: cases and predictions, metrics, fits, scoring, results, bands, prices, the served record."""
