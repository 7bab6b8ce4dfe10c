"""A latency the simulator draws per request: constant, or a known distribution whose quantiles are the truth a
measurement's intervals must cover (`--ttft-ms`).

Syntax: `MS` (constant), `lognormal:median=MS,sigma=S` (log of the latency normal with mean ln(median), standard
deviation S), `uniform:LOW,HIGH` (ms). Draws come from one seeded generator per simulator replica, one per request in
the order requests arrive: the n-th request gets the n-th draw.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist

KINDS = ("lognormal", "uniform")


@dataclass(frozen=True, slots=True)
class Latency:
    """A latency distribution, ms: `kind` "fixed" (`a`), "lognormal" (median `a`, sigma `b`) or "uniform" (`a`..`b`)."""

    kind: str
    a: float
    b: float = 0.0

    def quantile_ms(self, q: float) -> float:
        """The distribution's quantile `q` (0 < q < 1), ms: the truth."""
        if self.kind == "lognormal":
            return self.a * math.exp(self.b * NormalDist().inv_cdf(q))
        if self.kind == "uniform":
            return self.a + q * (self.b - self.a)
        return self.a

    def draw_ms(self, rng: random.Random) -> float:
        """One draw, ms."""
        if self.kind == "lognormal":
            return rng.lognormvariate(math.log(self.a), self.b)
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        return self.a

    def __str__(self) -> str:
        if self.kind == "lognormal":
            return f"lognormal:median={self.a:g},sigma={self.b:g}"
        if self.kind == "uniform":
            return f"uniform:{self.a:g},{self.b:g}"
        return f"{self.a:g}"


def parse_latency(text: str) -> Latency:
    """`MS`, `lognormal:median=MS,sigma=S` or `uniform:LOW,HIGH` as a `Latency`; ValueError naming the problem."""
    kind, _, rest = text.partition(":")
    if not rest:
        value = _number(text, text)
        if value < 0:
            raise ValueError(f"{text!r}: a latency must be >= 0 ms")
        return Latency("fixed", value)
    if kind == "lognormal":
        params = dict(part.partition("=")[::2] for part in rest.split(","))
        if set(params) != {"median", "sigma"}:
            raise ValueError(f"{text!r}: expected lognormal:median=MS,sigma=S")
        median, sigma = _number(params["median"], text), _number(params["sigma"], text)
        if median <= 0 or sigma < 0:
            raise ValueError(f"{text!r}: the median must be > 0 ms and sigma >= 0")
        return Latency("lognormal", median, sigma)
    if kind == "uniform":
        bounds = rest.split(",")
        if len(bounds) != 2:
            raise ValueError(f"{text!r}: expected uniform:LOW,HIGH (ms)")
        low, high = (_number(bound, text) for bound in bounds)
        if not 0 <= low <= high:
            raise ValueError(f"{text!r}: expected 0 <= LOW <= HIGH (ms)")
        return Latency("uniform", low, high)
    raise ValueError(f"{text!r}: expected MS or one of {', '.join(k + ':...' for k in KINDS)}")


def _number(text: str, whole: str) -> float:
    """`text` as a finite float; ValueError naming `whole` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{whole!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{whole!r}: {text!r} is not a finite number")
    return value
