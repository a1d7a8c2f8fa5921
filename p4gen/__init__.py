"""p4gen: generate, verify and exercise P4 in-network aggregation pipelines."""

__version__ = "0.1.0"
