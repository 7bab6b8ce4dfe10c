"""Prometheus text → one `Sample` of an inference server's standard columns (`server_maps`); pure, no I/O.

`parse` reads the text with prometheus-client's parser and detects the server family; `extract` maps the names
to the columns: gauges and counters as read, each latency histogram as its buckets, sum and count (`Hist`), an info
gauge's label as the number of names it lists (`server_maps`: `name{label}`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llm_locust.scrape.server_maps import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    NameMap,
    detect,
    family_name,
    split_label,
)


@dataclass(frozen=True, slots=True)
class Hist:
    """A cumulative Prometheus histogram summed over its label sets: (upper bound s, cumulative count)."""

    buckets: tuple[tuple[float, float], ...]
    sum_s: float
    count: float

    def minus(self, earlier: Hist | None) -> Hist:
        """The observations made since `earlier` (a restarted server: all of them)."""
        if earlier is None or self.count < earlier.count:
            return self
        before = dict(earlier.buckets)
        return Hist(tuple((le, n - before.get(le, 0.0)) for le, n in self.buckets), self.sum_s - earlier.sum_s,
                    self.count - earlier.count)  # fmt: skip

    def mean_ms(self) -> float | None:
        """Mean observation in ms, None without observations."""
        return self.sum_s / self.count * 1000.0 if self.count > 0 else None

    def quantile_ms(self, q: float) -> float | None:
        """The `q` quantile in ms, interpolated linearly inside its bucket (as PromQL's
        histogram_quantile); the highest finite bound when it falls in +Inf; None when empty."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for le, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(le):
                    return lower * 1000.0
                inside = cumulative - below
                share = (rank - below) / inside if inside > 0 else 1.0
                return (lower + (le - lower) * share) * 1000.0
            lower, below = le, cumulative
        return lower * 1000.0


@dataclass(slots=True)
class Sample:
    """One good scrape of one URL, mapped to the standard columns."""

    epoch_s: float
    values: dict[str, float] = field(default_factory=dict)  # gauges and token counters
    hists: dict[str, Hist] = field(default_factory=dict)


def parse(text: str, names: NameMap | None, maps: dict[str, NameMap]) -> tuple[str | None, dict[str, Any]]:
    """Parse exposition `text`; return (family detected when `names` is None, else None) and the
    parsed families by name (each family also under its samples' names). ValueError on bad text."""
    families: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family
        for sample in family.samples:
            families.setdefault(sample.name, family)
    return (detect(set(families), maps) if names is None else None), families


def extract(families: dict[str, Any], names: NameMap, epoch_s: float) -> Sample:
    """The standard columns found in `families` under `names` (the first candidate present)."""
    sample = Sample(epoch_s)
    for column, candidates in names.items():
        found = next(
            ((families[n], split_label(m)[1]) for m in candidates for n in (split_label(m)[0], family_name(m))
             if n in families),
            None,
        )  # fmt: skip
        if found is None:
            continue
        family, label = found
        if label:
            sample.values[column] = _listed_in_latest(family, label)
        elif family.type == "histogram":
            hist = _histogram(family)
            if column in HISTOGRAMS:
                sample.hists[column] = hist
            else:  # a histogram of token counts (TGI): its sum counts the tokens
                sample.values[column] = hist.sum_s
        elif column in GAUGES or column in COUNTERS:
            sample.values[column] = sum(s.value for s in family.samples if not s.name.endswith("_created"))
    return sample


def _listed_in_latest(family: Any, label: str) -> float:
    """The number of comma-separated names in `label` of the series of `family` with the largest value (0 without
    series)."""
    latest = max(family.samples, key=lambda s: s.value, default=None)
    names = latest.labels.get(label, "") if latest is not None else ""
    return float(len([name for name in names.split(",") if name]))


def _histogram(family: Any) -> Hist:
    buckets: dict[float, float] = {}
    sum_s = count = 0.0
    for s in family.samples:
        if s.name.endswith("_bucket"):
            le = float(s.labels.get("le", "inf"))
            buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name.endswith("_sum"):
            sum_s += s.value
        elif s.name.endswith("_count"):
            count += s.value
    return Hist(tuple(sorted(buckets.items())), sum_s, count)
