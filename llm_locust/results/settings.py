"""The results' settings (`OutputSettings`): where the results folder goes and the time series' interval,
validated from Locust's parsed options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from llm_locust.option_values import HIDDEN, build, positive


@dataclass(frozen=True)
class OutputSettings:
    """The results folder (not written into its own summary) and the interval of the time series' windows (s)."""

    results_dir: str = field(metadata=HIDDEN)
    interval_s: float

    @classmethod
    def from_options(cls, options: Any) -> OutputSettings:
        """Validated from `options`; ConfigError when `--interval-s` is not > 0. Without `--results-dir`: the folder
        of Locust's `--csv` prefix if given, else results/<local date-time>."""
        positive(options, "interval_s")
        return build(
            cls, options, results_dir=options.results_dir or _default_results_dir(getattr(options, "csv_prefix", None))
        )


def _default_results_dir(csv_prefix: str | None) -> str:
    """The folder of Locust's --csv prefix if given, else results/<local date-time>."""
    if csv_prefix:
        return os.path.dirname(csv_prefix) or "."
    return os.path.join("results", time.strftime("%Y%m%d-%H%M%S"))
