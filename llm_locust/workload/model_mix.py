"""Several models in one run (`--model-mix NAME=WEIGHT,...`): each request names a model drawn by weight.

The draw is one `random()` of the user's seeded RNG (the workload's) per request, so a seeded run repeats and the
users' draws are independent: over a run, model i's share of the requests is weight_i / sum(weights) within sampling
error (binomial: standard error sqrt(p (1 - p) / n)), whatever the number of workers. Each request then counts in
the `model` breakdown (summary.json `breakdowns.model`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import accumulate

from llm_locust.errors import ConfigError

DIMENSION = "model"
"""The breakdown's dimension in summary.json's "breakdowns"."""


@dataclass(frozen=True, slots=True)
class ModelMix:
    """The models and their weights (> 0), in the order given; empty: no mix (every request names --model)."""

    names: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names)

    def __str__(self) -> str:
        return ",".join(f"{name}={weight:g}" for name, weight in zip(self.names, self.weights, strict=True))

    def share(self, name: str) -> float:
        """The expected share (0..1) of the requests that name `name`."""
        return self.weights[self.names.index(name)] / sum(self.weights)

    def pick(self, rng: random.Random) -> str:
        """One model drawn by weight with one `rng.random()`."""
        return rng.choices(self.names, cum_weights=tuple(accumulate(self.weights)))[0]


def parse_model_mix(text: str, option: str = "--model-mix") -> ModelMix:
    """The mix of `text` ("a=3,b=1"; "" for none); ConfigError naming `option` and the bad entry."""
    if not text.strip():
        return ModelMix()
    names: list[str] = []
    weights: list[float] = []
    for entry in text.split(","):
        name, sep, weight_text = entry.strip().rpartition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"{option} {text!r}: expected NAME=WEIGHT,... (e.g. base=3,lora1=1), got {entry!r}")
        try:
            weight = float(weight_text)
        except ValueError:
            raise ConfigError(f"{option} {text!r}: the weight of {name!r} is not a number: {weight_text!r}") from None
        if not weight > 0 or weight == float("inf"):
            raise ConfigError(f"{option} {text!r}: the weight of {name!r} must be a positive number, got {weight_text}")
        if name in names:
            raise ConfigError(f"{option} {text!r}: model {name!r} is named twice")
        names.append(name)
        weights.append(weight)
    return ModelMix(tuple(names), tuple(weights))
