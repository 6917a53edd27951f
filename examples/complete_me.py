"""A small module with a gap: `fimlsp complete` fills the cursor position."""

from __future__ import annotations


def mean(values: list[float]) -> float:
    """Arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean of an empty list")
    total = sum(
    return total / len(values)


def variance(values: list[float]) -> float:
    """Population variance."""
    centre = mean(values)
    return sum((v - centre) ** 2 for v in values) / len(values)
