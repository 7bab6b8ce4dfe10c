"""Statistics for checking samples against a distribution."""

from __future__ import annotations

import numpy as np


def ks_exponential(samples: np.ndarray, rate: float) -> float:
    """Kolmogorov-Smirnov distance between `samples` and Exp(rate)."""
    x = np.sort(samples)
    cdf = 1 - np.exp(-rate * x)
    n = len(x)
    return float(max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n)))
