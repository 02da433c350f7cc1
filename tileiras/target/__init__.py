"""Target capabilities: one table (table.py) queried by feature name."""

from .table import BASE_NAMES, FEATURES, MMA_KINDS, ROWS, Caps, caps, known, since, with_feature

__all__ = ["BASE_NAMES", "FEATURES", "MMA_KINDS", "ROWS", "Caps", "caps", "known", "since", "with_feature"]
