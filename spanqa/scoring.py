"""Score arithmetic shared by the layers (no project imports): scaling and normalizing scores."""

from __future__ import annotations

import math
from collections.abc import Mapping


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores scaled to [0, 1] over the given ids (all 1.0 when they are equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if not math.isfinite(high - low) or high - low <= 0:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def logsumexp(values: list[float]) -> float:
    """``log(sum(exp(v)))`` without overflow; ``values`` must not be empty."""
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
