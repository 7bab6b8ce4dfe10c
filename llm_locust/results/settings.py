"""The results' settings (`OutputSettings`): where the results folder goes and the time series' interval,
validated from Locust's parsed options; each option declared on its field.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.option_values import HIDDEN, above, build, option, optional_float
from llm_locust.results.folder import named_folder

DEFAULT_PARENT = "results"
"""The folder holding the default results folders (results/<local date-time>)."""


@dataclass(frozen=True)
class OutputSettings:
    """The results folder (not written into its own summary), the interval of the time series' windows (s), and the
    endpoint's price in US dollars per hour for summary.json's `cost` (`--cost-per-hour`; 0: no cost); per-request
    records: `requests_jsonl` (write requests.jsonl) with the share of requests kept, `requests_sample` (0 < P <= 1)."""

    results_dir: str = field(
        metadata=option(
            "Folder for summary.json and llm_timeseries.csv (default: the folder of --csv, else results/<date-time>)",
            startup_only=True,
        )
        | HIDDEN
    )
    interval_s: float = field(
        metadata=option("Width of one row of the LLM time series (llm_timeseries.csv), seconds", 5.0, check=above(0))
    )
    cost_per_hour: float = field(
        metadata=option(
            "Price of the endpoint (or of its GPUs) in US dollars per hour: summary.json and the report give dollars "
            "per million output and input tokens (0: no cost)",
            0.0,
        )
    )
    requests_jsonl: bool = field(
        metadata=option(
            "Write one JSON line per request (timestamps, lengths, outcome, the server's request id) to "
            "requests.jsonl in the results folder",
            False,
            startup_only=True,
        )
    )
    requests_sample: float = field(
        metadata=option("With --requests-jsonl: the share P of requests written (0 < P <= 1, drawn with --seed)", 1.0)
    )

    @classmethod
    def from_options(cls, options: Any) -> OutputSettings:
        """Validated from `options`; ConfigError when `--interval-s` is not > 0, `--cost-per-hour` is not a finite
        number >= 0 or `--requests-sample` not in (0, 1]. Without `--results-dir`: the folder of Locust's `--csv`
        prefix if given, else results/<local date-time>."""
        price = options.cost_per_hour
        if not 0 <= price < math.inf:
            raise ConfigError(f"--cost-per-hour must be a price in US dollars per hour >= 0, e.g. 2.5, got {price}")
        sample = optional_float(options, "requests_sample")  # the web UI's form may send it empty: the default
        sample = 1.0 if sample is None else sample
        if not 0 < sample <= 1:
            raise ConfigError(f"--requests-sample must be > 0 and <= 1 (a share of the requests), got {sample:g}")
        return build(
            cls,
            options,
            results_dir=results_dir_of(options),
            requests_sample=sample,
        )


def results_dir_of(options: Any) -> str:
    """The results folder `options` name: `--results-dir`, else the default (`_default_results_dir`, made now)."""
    return options.results_dir or _default_results_dir(getattr(options, "csv_prefix", None))


def _default_results_dir(csv_prefix: str | None) -> str:
    """The folder of Locust's --csv prefix if given, else results/<local date-time>."""
    named = named_folder("", csv_prefix)
    return str(named[1]) if named is not None else os.path.join(DEFAULT_PARENT, time.strftime("%Y%m%d-%H%M%S"))
