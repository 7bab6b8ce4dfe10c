"""Token-length distributions: parsed from one option string, sampled with the caller's RNG.

Syntax (`--prompt-tokens`, `--max-tokens`):

    N                          fixed N (same as fixed:N)
    fixed:N
    uniform:MIN,MAX            integers MIN..MAX inclusive
    normal:MEAN,SD[,MIN,MAX]   rounded, clamped to MIN..MAX (default 1..unbounded)
    lognormal:MEAN,SD[,MIN,MAX]  lognormal with that mean and standard deviation of the
                               lengths themselves (not of their logarithm), rounded, clamped

Every sample is an integer >= 1.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from llm_locust.errors import ConfigError

_SYNTAX = "N, fixed:N, uniform:MIN,MAX, normal:MEAN,SD[,MIN,MAX] or lognormal:MEAN,SD[,MIN,MAX]"


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token lengths; `sample(rng)` returns an int >= 1."""

    kind: str
    a: float  # fixed: N; uniform: MIN; normal / lognormal: MEAN
    b: float = 0.0  # uniform: MAX; normal / lognormal: SD
    low: int = 1
    high: int | None = None

    def sample(self, rng: random.Random) -> int:
        """One length in tokens, drawn with `rng`."""
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:  # lognormal: mu, sigma of the underlying normal from the mean and SD of the lengths
            sigma2 = math.log1p((self.b / self.a) ** 2)
            value = rng.lognormvariate(math.log(self.a) - sigma2 / 2, math.sqrt(sigma2))
        n = max(self.low, round(value))
        return n if self.high is None else min(n, self.high)

    @property
    def mean(self) -> float:
        """The nominal mean length in tokens (before clamping)."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def __str__(self) -> str:
        if self.kind == "fixed":
            return str(int(self.a))
        params = [self.a, self.b] + ([self.low, self.high] if (self.low, self.high) != (1, None) else [])
        return f"{self.kind}:" + ",".join(f"{p:g}" if isinstance(p, float) else str(p) for p in params)


class StepLengths(Protocol):
    """What a request takes from a length sweep's step (`load.arrivals.Step` is one): the prompt and output lengths
    it sets, None where the step leaves the option's distribution in force."""

    @property
    def prompt_tokens(self) -> int | None: ...

    @property
    def max_tokens(self) -> int | None: ...


def split_distribution(
    text: str, option: str, arities: Mapping[str, tuple[int, ...]], syntax: str
) -> tuple[str, list[float], Callable[[str], ConfigError]]:
    """Split a distribution's text, `KIND:P1,P2,...` or a bare number (`fixed`), into its kind (a key of `arities`,
    which gives the parameter counts it takes) and its parameters; with the function that makes the one-line
    ConfigError of `option` for a problem (`syntax`: what is expected). ConfigError for an unknown kind, a parameter
    that is not a number, or the wrong count."""
    text = str(text).strip()
    kind, colon, rest = text.partition(":")
    if not colon:
        kind, rest = "fixed", text
    kind = kind.lower()

    def fail(why: str) -> ConfigError:
        return ConfigError(f"{option} {text!r}: {why}; expected {syntax}")

    if kind not in arities:
        raise fail(f"unknown distribution {kind!r}")
    try:
        values = [float(v) for v in rest.split(",")] if rest.strip() else []
    except ValueError:
        raise fail("parameters must be numbers") from None
    if len(values) not in arities[kind]:
        raise fail(f"{kind} takes {' or '.join(map(str, arities[kind]))} parameter(s), got {len(values)}")
    return kind, values, fail


def parse_length(text: str, option: str) -> LengthDist:
    """Parse a length distribution (module docstring syntax); ConfigError naming `option` if invalid."""
    arities = {"fixed": (1,), "uniform": (2,), "normal": (2, 4), "lognormal": (2, 4)}
    kind, values, fail = split_distribution(text, option, arities, _SYNTAX)
    integers = values if kind in ("fixed", "uniform") else values[2:]
    if any(v != int(v) for v in integers):
        raise fail("lengths must be whole numbers")
    if kind == "fixed":
        if values[0] < 1:
            raise fail("the length must be >= 1")
        return LengthDist("fixed", values[0])
    if kind == "uniform":
        if not 1 <= values[0] <= values[1]:
            raise fail("need 1 <= MIN <= MAX")
        return LengthDist("uniform", values[0], values[1])
    mean, sd = values[0], values[1]
    if not (mean > 0 and sd >= 0):
        raise fail("need MEAN > 0 and SD >= 0")
    low, high = (int(values[2]), int(values[3])) if len(values) == 4 else (1, None)
    if low < 1 or (high is not None and high < low):
        raise fail("need 1 <= MIN <= MAX")
    return LengthDist(kind, mean, sd, low, high)
